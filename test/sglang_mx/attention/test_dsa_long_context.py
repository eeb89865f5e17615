"""mx_dsa's torch path (attention/dsa/sparse_math.py, what the CPU platform serves and the GPU
path's reference) at GLM-5.2's long-context shape: a 20k-token request, top-k 2,048, SGLang's paged
FP8 index-key pool and a latent pool in plain bf16 and packed FP8 rows; a decode query and a
prefill chunk of queries at the end of the context (each its own causal limit), checked against
sgl_kernel_rocm's float64 references, written apart from it (per request, by page table)."""

from __future__ import annotations

import pytest
import torch
from sgl_kernel_rocm.attention import dsa_indexer_scores_ref, dsa_sparse_decode_ref
from sgl_kernel_rocm.attention.latent_layout import LatentLayout
from sglang_mx.attention.dsa import sparse_math
from sglang_mx.attention.dsa.index_k_pages import IndexKLayout

SEQ, CHUNK, TOP_K, PAGE = 20_517, 4, 2048, 64  # the last CHUNK positions are queries
INDEX_HEADS, INDEX_DIM, HEADS, D_QK = 32, 128, 8, 576
INDEX_K = IndexKLayout(PAGE, INDEX_DIM)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(int(torch.randint(2**31, ())))


@pytest.fixture(scope="module")
def pools():
    """One request's slots scattered over whole pages of a pool, index keys stored as SGLang
    stores them, and the selection the torch path makes for its last CHUNK positions."""
    g = _gen()
    pages = -(-SEQ // PAGE)
    table = torch.randperm(2 * pages, generator=g)[:pages]
    slots = (table[:, None] * PAGE + torch.arange(PAGE)).flatten()[:SEQ]
    index_buf = torch.zeros(2 * pages, PAGE * (INDEX_DIM + 4), dtype=torch.uint8)
    INDEX_K.store(index_buf, slots, torch.randn(SEQ, INDEX_DIM, generator=g))
    req = sparse_math.Request(start=0, extend=CHUNK, seq_len=SEQ, slots=slots)
    q = torch.randn(CHUNK, INDEX_HEADS, INDEX_DIM, generator=g)
    w = torch.randn(CHUNK, INDEX_HEADS, generator=g) * INDEX_DIM**-0.5
    idx = sparse_math.index_topk(q, w, index_buf, INDEX_K, [req], TOP_K)
    return g, table.to(torch.int32), slots, index_buf, req, q, w, idx


def _per_query(n_queries: int) -> torch.Tensor:
    """Each query's own length: query i of the chunk sits at position SEQ - CHUNK + i."""
    return torch.arange(SEQ - n_queries + 1, SEQ + 1, dtype=torch.int32)


def test_torch_indexer_selects_the_top_2048_of_each_querys_keys(pools):
    _, table, _, index_buf, _, q, w, idx = pools
    keys, scales = INDEX_K.page_views(index_buf)
    lens = _per_query(CHUNK)
    bt = table.expand(CHUNK, -1).contiguous()
    ref = dsa_indexer_scores_ref(q, w, keys, scales, bt, lens)  # float64 of the same values
    assert idx.shape == (CHUNK, TOP_K) and idx.dtype == torch.int32
    for i, n in enumerate(lens.tolist()):
        chosen = idx[i].long()
        assert chosen.min() >= 0 and chosen.max() < n, "a key past the query's own position"
        assert chosen.unique().numel() == TOP_K
        rest = torch.ones(n, dtype=torch.bool)
        rest[chosen] = False
        # fp32 scores of the torch path vs float64: near-ties may swap within 1e-4
        assert ref[i, chosen].min() >= ref[i, :n][rest].max() - 1e-4, f"query {i}"
    assert int(idx.max()) >= 16_384, "the selection reaches past 16k positions"


@pytest.mark.parametrize("packed", [False, True], ids=["bf16-rows", "packed-fp8-rows"])
def test_torch_sparse_attention_over_the_selection(pools, packed):
    g, table, slots, _, req, _, _, idx = pools
    layout = LatentLayout.packed_fp8() if packed else LatentLayout.plain()
    col = torch.logspace(-2, 1, D_QK)[torch.randperm(D_QK, generator=g)]
    latent = torch.randn(2 * table.numel() * PAGE, D_QK, generator=g) * col
    kv_buf = layout.pack(latent, None if packed else torch.bfloat16).unsqueeze(1)
    q = torch.randn(CHUNK, HEADS, D_QK, generator=g).to(torch.bfloat16)
    scale = D_QK**-0.5
    out = sparse_math.mla_attend(q.float(), kv_buf, [req], scale, 512, idx, layout)
    pool = kv_buf.squeeze(1)
    pool = pool.view(-1, PAGE, pool.shape[-1])  # slot = page * PAGE + offset
    bt = table.expand(CHUNK, -1).contiguous()
    ref = dsa_sparse_decode_ref(q, pool, bt, _per_query(CHUNK), idx, sm_scale=scale, layout=layout)
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)
