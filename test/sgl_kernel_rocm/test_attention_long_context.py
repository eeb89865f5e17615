"""Decode attention at GLM-5.2's long-context shapes (CPU, Triton interpreter, float64 references):
the indexer scoring 20k+ keys and selecting 2,048 of them, the sparse decode over those 2,048
with split-KV, dense MLA split over hundreds of pages, plain bf16 / FP8 and packed FP8 rows; and
byte offsets past 2^31 in a pool as large as a GPU rank holds.

Where int32 would overflow first (`test_first_int32_overflow_is_a_byte_offset_a_rank_reaches`):
a packed latent row is 656 bytes, so token slot 3,273,603 of one layer's pool is the first whose
row reaches past byte 2^31: its byte offsets no longer fit in int32. Token positions (< 200k)
and slot ids (< 2^31) fit by orders of magnitude. An MI355X rank serving GLM-5.2 holds more
tokens than that, so every kernel forms row addresses from a 64-bit page id; the big-pool tests
read rows past the 2^31st byte against the reference. With the page id left 32-bit in the
sparse tile's address (tried 2026-12-04), the product wrapped and the interpreter read outside
the pool: the test process died (SIGSEGV)."""

from __future__ import annotations

import pytest
import torch
from attention_support import assert_bf16_close, assert_topk_selection
from sgl_kernel_rocm import attention as att
from sgl_kernel_rocm.attention.latent_layout import LatentLayout
from sgl_kernel_rocm.attention.topk_radix import select_topk_radix
from sglang_mx_lab.testing.dsa_selection import (
    format_scores,
    fp8_index_key,
    fp8_index_key_pages,
    latest_keys,
    selection_overlap,
)

TOP_K = 2048  # GLM-5.2's index_topk
LENS = [20_517, 12_288]  # a 20k-token request; a 12k one (the 60%-hit prefix)
PAGE = 64
HEADS = 16  # of GLM-5.2's 64 per layer: keeps the interpreter quick; heads only widen the tile
INDEX_HEADS, INDEX_DIM = 32, 128  # GLM-5.2's indexer
D_QK = 576
PACKED = LatentLayout.packed_fp8()
INT32_END = 2**31
GLM52_CONTEXT = 202_752
SELECTION_BOUND = 0.99  # of a top-2048 row the format's float64 top-k must accept


def _gen() -> torch.Generator:
    """Fresh inputs each run, replayable: seeded from the test's seed (conftest)."""
    return torch.Generator().manual_seed(int(torch.randint(2**31, ())))


def _table(g: torch.Generator, first_page: int, pool_pages: int) -> torch.Tensor:
    """[len(LENS), pages] int32: distinct pages scattered over [first_page, pool_pages)."""
    width = -(-max(LENS) // PAGE)
    picks = first_page + torch.randperm(pool_pages - first_page, generator=g)
    return picks[: len(LENS) * width].view(len(LENS), width).to(torch.int32)


def _indexer_inputs(g: torch.Generator, pool_pages: int, first_page: int = 0):
    """An FP8 index-key pool of `pool_pages` pages (torch.empty: untouched pages cost no memory),
    the pages the block table uses filled; queries and head weights as GLM-5.2 shapes them."""
    bt = _table(g, first_page, pool_pages)
    keys = torch.empty(pool_pages, PAGE, INDEX_DIM, dtype=torch.float8_e4m3fn)
    scales = torch.empty(pool_pages, PAGE)
    used = bt.flatten().long()
    keys[used] = (torch.randn(used.numel(), PAGE, INDEX_DIM, generator=g) * 4).to(keys.dtype)
    scales[used] = torch.rand(used.numel(), PAGE, generator=g) + 0.05
    q = torch.randn(len(LENS), INDEX_HEADS, INDEX_DIM, generator=g).to(torch.bfloat16)
    w = torch.randn(len(LENS), INDEX_HEADS, generator=g) * INDEX_DIM**-0.5
    return q, w, keys, scales, bt, torch.tensor(LENS, dtype=torch.int32)


def _latent_pool(g: torch.Generator, layout: LatentLayout, dtype, bt: torch.Tensor, pages: int):
    """A latent pool of `pages` pages (torch.empty) whose block-table pages hold GLM-like rows."""
    used = bt.flatten().long()
    col = torch.logspace(-2, 1, D_QK)[torch.randperm(D_QK, generator=g)]
    rows = layout.pack(torch.randn(used.numel(), PAGE, D_QK, generator=g) * col, dtype)
    pool = torch.empty(pages, PAGE, rows.shape[-1], dtype=rows.dtype)
    pool[used] = rows
    return pool


LAYOUTS = {
    "bf16": (LatentLayout.plain(), torch.bfloat16, None),
    "fp8": (LatentLayout.plain(), torch.float8_e4m3fn, 0.25),
    "packed-fp8": (PACKED, None, None),
}


def test_indexer_picks_2048_of_20k_keys():
    """Scores of every key, then both selections (torch.topk and the Triton radix select)."""
    g = _gen()
    q, w, keys, scales, bt, seq = _indexer_inputs(g, pool_pages=2 * bt_width() + 5)
    scores = att.dsa_indexer_scores(q, w, keys, scales, bt, seq, max(LENS))
    ref = att.dsa_indexer_scores_ref(q, w, keys, scales, bt, seq)
    fin = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(scores), fin), "positions past each length must be -inf"
    torch.testing.assert_close(scores[fin].double(), ref[fin], atol=1e-4, rtol=1e-5)
    for select in (att.select_topk, select_topk_radix):
        idx = select(scores, seq, TOP_K)
        assert idx.shape == (len(LENS), TOP_K) and idx.dtype == torch.int32
        assert_topk_selection(idx, ref, LENS, TOP_K, slack=2e-4, note=select.__name__)
        assert int(idx.max()) >= 16_384, "the selection reaches past 16k positions"


def bt_width() -> int:
    return -(-max(LENS) // PAGE)


def test_indexer_top_2048_of_20k_is_the_formats_choice():
    """dsa_indexer (score kernel + torch.topk, the GPU decode's selection) for one query over
    20,517 keys written to FP8 pages by the format's definition (sglang_mx_lab's dsa_selection:
    e4m3 with one power-of-two scale per token, no code of this package), judged by how much of
    its top-2,048 the float64 top-k of those keys accepts. Keys spread over 12 binades of
    magnitude, so the per-token scales decide the choice. Bound 0.99 (room for near-ties
    between the kernel's fp32 and float64). Measured 2026-12-06 (Triton interpreter, 2-core
    box): 1.0 on 10 seeds, where each query's newest 2,048 keys score 0.097-0.106 (about
    2,048 / 20,517); planted by hand, each failed: the selection returning the newest 2,048
    keys 0.09-0.11, the kernel without the per-token scale 0.30, without the relu 0.74. About
    3 s of CPU."""
    overlap, planted = judged_selection(_gen())
    assert overlap >= SELECTION_BOUND, f"overlap {overlap:.4f} (latest keys: {planted:.4f})"
    assert planted < SELECTION_BOUND, f"the latest keys would pass: {planted:.4f}"


def judged_selection(g: torch.Generator) -> tuple[float, float]:
    """(overlap of dsa_indexer's top-k, overlap of the newest TOP_K keys) with the reference."""
    n, pool_pages = LENS[0], bt_width() + 7
    binades = torch.exp2(12 * torch.rand(n, 1, generator=g) - 6)
    key = torch.randn(n, INDEX_DIM, generator=g) * binades
    bt = torch.randperm(pool_pages, generator=g)[: bt_width()].to(torch.int32)
    pos = torch.arange(n)
    slots = bt[pos // PAGE].long() * PAGE + pos % PAGE
    keys, scales = fp8_index_key_pages(key, slots, pool_pages, PAGE)
    q = torch.randn(1, INDEX_HEADS, INDEX_DIM, generator=g)
    w = torch.randn(1, INDEX_HEADS, generator=g) * INDEX_DIM**-0.5
    seq = torch.tensor([n], dtype=torch.int32)
    idx = att.dsa_indexer(q, w, keys, scales, bt[None], seq, top_k=TOP_K, max_seq_len=n)
    last = torch.tensor([n - 1])
    ref = format_scores(q, w, fp8_index_key(key), last)
    overlap = selection_overlap(idx, ref, TOP_K)
    return float(overlap[0]), float(selection_overlap(latest_keys(last, TOP_K), ref, TOP_K)[0])


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sparse_decode_over_2048_selected_keys_split(layout):
    """2,048 keys scattered over a 20k context (the indexer's kind of list: unsorted, spread over
    every page), split 8 ways."""
    g = _gen()
    lay, dtype, scale = LAYOUTS[layout]
    bt = _table(g, 0, 2 * bt_width() + 5)
    kv = _latent_pool(g, lay, dtype, bt, 2 * bt_width() + 5)
    seq = torch.tensor(LENS, dtype=torch.int32)
    idx = torch.stack([torch.randperm(n, generator=g)[:TOP_K] for n in LENS]).to(torch.int32)
    q = torch.randn(len(LENS), HEADS, D_QK, generator=g).to(torch.bfloat16)
    out = torch.full((len(LENS), HEADS, 512), float("nan"), dtype=torch.bfloat16)
    opts = {"kv_scale": scale, "layout": lay}
    if lay.name == PACKED.name:
        kv = kv.view(torch.float8_e4m3fn)  # how SGLang's pool hands packed rows over
    att.dsa_sparse_decode(q, kv, bt, seq, idx, num_splits=8, out=out, **opts)
    assert_bf16_close(out, att.dsa_sparse_decode_ref(q, kv, bt, seq, idx, **opts), layout)


# ------------------------------------------------------------------ offsets past 2^31 bytes


def test_first_int32_overflow_is_a_byte_offset_a_rank_reaches():
    """Which index would overflow int32 first, and that a GLM-5.2 rank reaches it: the byte
    offset of a packed latent row (656 B) at token slot 3,273,603 of one layer's pool."""
    from sglang_mx.capacity.hardware import get_hardware
    from sglang_mx.capacity.modelspec import load_model

    row = PACKED.row_width
    first = -(-(INT32_END - row + 1) // row)  # the first slot with a byte past int32
    assert first == 3_273_603
    glm = load_model("glm-5.2")
    # Before it: a request's rows (context 202,752 = max_position_embeddings) and the indexer's
    # key bytes (132 per token with its scale: 16.3M slots) stay inside int32.
    assert GLM52_CONTEXT * PACKED.row_width < INT32_END
    assert INT32_END // (INDEX_DIM + 4) > 4 * first
    # An MI355X rank of a TP8 node: its share of the MXFP4 weights (~0.53 B per parameter)
    # leaves room for more tokens than that in every layer's pool.
    hbm = get_hardware("MI355X").hbm_bytes
    weights = glm.total_params * 0.53 / 8
    per_token = glm.layers * PACKED.row_width + glm.indexer_layers * (INDEX_DIM + 4)
    rank_tokens = 0.85 * (hbm - weights) / per_token
    assert rank_tokens > first, f"{rank_tokens:.3g} tokens per rank"


def test_indexer_reads_keys_past_2_31_bytes():
    """An index-key pool of 262,208 pages x 64 tokens x 128 B (2^31 + 4 MiB, allocated lazily),
    the request's pages at its far end: scores equal the reference's."""
    g = _gen()
    pages = INT32_END // (PAGE * INDEX_DIM) + 2 * bt_width() + 16
    q, w, keys, scales, bt, seq = _indexer_inputs(g, pages, first_page=pages - 2 * bt_width() - 8)
    assert keys.nbytes > INT32_END and int(bt.min()) * PAGE * INDEX_DIM >= INT32_END
    scores = att.dsa_indexer_scores(q, w, keys, scales, bt, seq, max(LENS))
    ref = att.dsa_indexer_scores_ref(q, w, keys, scales, bt, seq)
    fin = torch.isfinite(ref)
    torch.testing.assert_close(scores[fin].double(), ref[fin], atol=1e-4, rtol=1e-5)


def test_latent_rows_past_2_31_bytes_dense_and_sparse():
    """A packed latent pool of 2^31 bytes and more (lazily allocated), the requests' pages all
    past the 2^31st byte: dense and top-2048 sparse decode equal the reference."""
    g = _gen()
    pages = INT32_END // (PAGE * PACKED.row_width) + 2 * bt_width() + 16
    bt = _table(g, pages - 2 * bt_width() - 8, pages)
    kv = _latent_pool(g, PACKED, None, bt, pages)
    assert kv.nbytes > INT32_END and int(bt.min()) * PAGE * PACKED.row_width >= INT32_END
    seq = torch.tensor(LENS, dtype=torch.int32)
    q = torch.randn(len(LENS), HEADS, D_QK, generator=g).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(n, generator=g)[:TOP_K] for n in LENS]).to(torch.int32)
    sparse = torch.full((len(LENS), HEADS, 512), float("nan"), dtype=torch.bfloat16)
    att.dsa_sparse_decode(q, kv, bt, seq, idx, num_splits=4, out=sparse, layout=PACKED)
    ref = att.dsa_sparse_decode_ref(q, kv, bt, seq, idx, layout=PACKED)
    assert_bf16_close(sparse, ref, "sparse")
    # Dense over the shorter request only: 12k keys is enough to cross every page
    short = slice(1, 2)
    dense = torch.full((1, HEADS, 512), float("nan"), dtype=torch.bfloat16)
    att.mla_decode(q[short], kv, bt[short], seq[short], num_splits=8, out=dense, layout=PACKED)
    ref = att.mla_decode_ref(q[short], kv, bt[short], seq[short], layout=PACKED)
    assert_bf16_close(dense, ref, "dense")
