"""Absorbed MLA decode, DSA sparse decode and the DSA indexer vs float64 references (CPU)."""

from __future__ import annotations

import pytest
import torch
from attention_support import assert_bf16_close, assert_topk_selection, scattered_pages
from sgl_kernel_rocm import attention

HEADS = 16  # GLM-5 has 64 per rank-less layer; 16 keeps the interpreter quick
D_QK = 576  # 512 latent + 64 rope


def _cache(seed: int, page: int, lens: list[int], kv_dtype: torch.dtype, dim: int = D_QK):
    g = torch.Generator().manual_seed(seed)
    max_pages = -(-max(lens) // page)
    pool = len(lens) * max_pages + 2
    kv, bt = scattered_pages(g, pool, page, (dim,), kv_dtype, len(lens), max_pages)
    return g, kv, bt, torch.tensor(lens, dtype=torch.int32)


@pytest.mark.parametrize("page", [1, 16, 64])
@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn], ids=["bf16", "fp8"])
@pytest.mark.parametrize("splits", [1, 3])
def test_mla_decode_matches_reference(page, kv_dtype, splits):
    g, kv, bt, seq = _cache(page + splits, page, [1, 45, 190], kv_dtype)
    q = torch.randn(3, HEADS, D_QK, generator=g).to(torch.bfloat16)
    scale = 0.25 if kv_dtype == torch.float8_e4m3fn else None  # per-tensor FP8 dequant
    out = torch.full((3, HEADS, 512), float("nan"), dtype=torch.bfloat16)
    attention.mla_decode(q, kv, bt, seq, kv_scale=scale, num_splits=splits, out=out)
    assert_bf16_close(out, attention.mla_decode_ref(q, kv, bt, seq, kv_scale=scale))


def test_mla_decode_odd_head_count_and_lse():
    g, kv, bt, seq = _cache(9, 16, [30, 77], torch.bfloat16)
    q = torch.randn(2, 20, D_QK, generator=g).to(torch.bfloat16)  # 20 heads: 2 masked head blocks
    out, lse = attention.mla_decode(q, kv, bt, seq, num_splits=2, sm_scale=0.05, return_lse=True)
    assert_bf16_close(out, attention.mla_decode_ref(q, kv, bt, seq, sm_scale=0.05))
    keys = kv[bt[1, :5].long()].reshape(-1, D_QK)[:77].double()
    s = torch.einsum("hd,nd->hn", q[1].double(), keys)
    # fp32 running max/sum: ~1e-6 relative of |lse|.
    torch.testing.assert_close(lse[1].double(), torch.logsumexp(s * 0.05, -1), atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    ("heads", "block_h"), [(64, 64), (20, 32), (64, 32)], ids=["h64-all", "h20-masked", "h64-2blk"]
)
def test_mla_and_dsa_with_wide_head_blocks(monkeypatch, heads, block_h):
    """The GPU tables hold up to 64 heads per program (GLM-5.2 DP attention reads the latent
    once): the same kernel at those BLOCK_H values, padded rows masked, dense and sparse."""
    import importlib

    mla_mod = importlib.import_module("sgl_kernel_rocm.attention.mla_decode")
    real = mla_mod._common.resolve_config
    monkeypatch.setattr(
        mla_mod._common, "resolve_config", lambda *a: {**real(*a), "BLOCK_H": block_h}
    )
    assert mla_mod.mla_block_h({"BLOCK_H": block_h}, heads) == min(
        block_h, 64 if heads > 32 else 32
    )
    g, kv, bt, seq = _cache(heads + block_h, 16, [37, 130], torch.float8_e4m3fn)
    q = torch.randn(2, heads, D_QK, generator=g).to(torch.bfloat16)
    out = torch.full((2, heads, 512), float("nan"), dtype=torch.bfloat16)
    attention.mla_decode(q, kv, bt, seq, kv_scale=0.5, num_splits=2, out=out)
    assert_bf16_close(out, attention.mla_decode_ref(q, kv, bt, seq, kv_scale=0.5))
    idx = torch.randint(-1, 140, (2, 48), generator=g, dtype=torch.int32)
    sparse = attention.dsa_sparse_decode(q, kv, bt, seq, idx, kv_scale=0.5)
    assert_bf16_close(sparse, attention.dsa_sparse_decode_ref(q, kv, bt, seq, idx, kv_scale=0.5))


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn], ids=["bf16", "fp8"])
@pytest.mark.parametrize("splits", [1, 4])
@pytest.mark.parametrize("page", [1, 64])
def test_dsa_sparse_decode_duplicates_and_short_lists(kv_dtype, splits, page):
    lens = [1, 50, 220, 300]
    g, kv, bt, seq = _cache(31 + splits + page, page, lens, kv_dtype)
    q = torch.randn(4, HEADS, D_QK, generator=g).to(torch.bfloat16)
    top_k = 96
    idx = torch.full((4, top_k), -1, dtype=torch.int32)
    idx[0, :3] = 0  # one valid token, listed three times
    idx[1, :40] = torch.randint(0, 50, (40,), generator=g, dtype=torch.int32)  # dups likely
    idx[1, 40:45] = 70  # beyond seq_len: skipped
    idx[2] = torch.randperm(220, generator=g)[:top_k].to(torch.int32)  # full list
    idx[2, 10:20] = idx[2, 0]  # ten duplicates of one position
    idx[3] = -1  # nothing valid: zeros
    out = torch.full((4, HEADS, 512), float("nan"), dtype=torch.bfloat16)
    scale = 0.25 if kv_dtype == torch.float8_e4m3fn else None
    attention.dsa_sparse_decode(q, kv, bt, seq, idx, kv_scale=scale, num_splits=splits, out=out)
    ref = attention.dsa_sparse_decode_ref(q, kv, bt, seq, idx, kv_scale=scale)
    assert_bf16_close(out, ref)
    assert torch.equal(out[3], torch.zeros_like(out[3]))


@pytest.mark.parametrize("page", [1, 16, 64])  # 64: one page per 64-key tile (one page id)
def test_dsa_indexer_scores_and_topk(page):
    lens = [1, 40, 257]
    g, k, bt, seq = _cache(77 + page, page, lens, torch.float8_e4m3fn, dim=128)
    k_scale = torch.rand(k.shape[:2], generator=g) + 0.05  # per-token FP8 scale
    q = torch.randn(3, 32, 128, generator=g).to(torch.bfloat16)
    w = torch.randn(3, 32, generator=g) * 128**-0.5
    scores = attention.dsa_indexer_scores(q, w, k, k_scale, bt, seq, max(lens))
    ref = attention.dsa_indexer_scores_ref(q, w, k, k_scale, bt, seq)
    assert torch.equal(torch.isinf(scores), torch.isinf(ref)), "padding must be -inf"
    # Without a host max length the width is the block table's capacity, -inf past each length.
    wide = attention.dsa_indexer_scores(q, w, k, k_scale, bt, seq)
    assert wide.shape == (3, bt.shape[1] * page)
    assert torch.equal(wide[:, : max(lens)], scores) and torch.isinf(wide[:, max(lens) :]).all()
    fin = torch.isfinite(ref)
    # fp32 dot over 128 dims and a 32-head sum of exact bf16/fp8 products: ~1e-6 relative.
    torch.testing.assert_close(scores[fin].double(), ref[fin], atol=1e-4, rtol=1e-5)

    top_k = 64
    idx = attention.dsa_indexer(q, w, k, k_scale, bt, seq, top_k=top_k)
    assert_topk_selection(idx, ref, lens, top_k, slack=2e-4)  # 2x the score tolerance above


def test_dsa_indexer_loops_over_tiles_in_chunks(monkeypatch):
    """GPU tables make each program loop over several key tiles (chunks of a row); force that
    split here (2 rows x 5 tiles over a target of 5 programs: 2 tiles per program, 3 chunks,
    the last one partly past the row)."""
    import importlib

    idx_mod = importlib.import_module("sgl_kernel_rocm.attention.dsa_indexer")
    real = idx_mod.resolve_config
    monkeypatch.setattr(
        idx_mod, "resolve_config", lambda *a: {**real(*a), "BLOCK_N": 16, "target_programs": 5}
    )
    lens = [3, 70]
    g, k, bt, seq = _cache(5, 16, lens, torch.float8_e4m3fn, dim=128)
    k_scale = torch.rand(k.shape[:2], generator=g) + 0.05
    q = torch.randn(2, 32, 128, generator=g).to(torch.bfloat16)
    w = torch.randn(2, 32, generator=g) * 128**-0.5
    scores = attention.dsa_indexer_scores(
        q, w, k, k_scale, bt, seq, 70
    )  # 5 tiles of 16 keys per row
    ref = attention.dsa_indexer_scores_ref(q, w, k, k_scale, bt, seq)
    assert torch.equal(torch.isinf(scores), torch.isinf(ref)), "padding must be -inf"
    fin = torch.isfinite(ref)
    torch.testing.assert_close(scores[fin].double(), ref[fin], atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("arch", ["sm90", "gfx950", "gfx942", "sm100"])
def test_dsa_splits_the_selected_keys_at_small_batch(arch):
    """At batch 1 the 2,048 selected keys are spread over >= 8 programs on every shipped
    table (a program per head block and split, each writing its own partial), so a lone
    request does not run on a handful of CUs/SMs."""
    from sgl_kernel_rocm.attention import _common
    from sgl_kernel_rocm.attention.mla_decode import mla_block_h
    from sgl_kernel_rocm.tuning import get_config

    for heads in (8, 64):
        cfg, _ = get_config("decode_dsa", arch, 1, f"h{heads}_d576_kvfp8",
                            _common.gpu_decode_heuristic)  # fmt: skip
        head_blocks = -(-heads // mla_block_h(cfg, heads))
        splits = _common.plan_splits(cfg, head_blocks, 2048)
        assert head_blocks * splits >= 8, (arch, heads, cfg)


def test_split_merge_is_deterministic():
    """The split merge sums the partials in a fixed order in one program per row: no kernel of
    the attention package uses atomics, so a decode gives the same bits on every run."""
    import pathlib

    import sgl_kernel_rocm.attention as pkg

    for path in pathlib.Path(pkg.__file__).parent.glob("*.py"):
        assert "atomic_" not in path.read_text(), f"{path.name} uses an atomic"
    g, kv, bt, seq = _cache(3, 16, [40, 200], torch.float8_e4m3fn)
    q = torch.randn(2, HEADS, D_QK, generator=g).to(torch.bfloat16)
    idx = torch.randint(-1, 200, (2, 96), generator=g, dtype=torch.int32)
    runs = [
        attention.dsa_sparse_decode(q, kv, bt, seq, idx, kv_scale=0.5, num_splits=6)
        for _ in range(2)
    ]
    assert torch.equal(runs[0], runs[1])
    assert_bf16_close(runs[0], attention.dsa_sparse_decode_ref(q, kv, bt, seq, idx, kv_scale=0.5))
