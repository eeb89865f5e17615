"""Paged GQA decode vs its float64 reference (Triton interpreter on CPU), plus the split reduce."""

from __future__ import annotations

import json

import pytest
import torch
from attention_support import assert_bf16_close
from sgl_kernel_rocm.attention import gqa_decode, gqa_decode_ref, merge_splits, merge_splits_ref
from sgl_kernel_rocm.tuning import CONFIG_DIR, get_config

D = 64
HKV = 2


def _case(seed: int, page: int, group: int, kv_dtype: torch.dtype, lens: list[int]):
    """Fresh random paged cache with pages scattered over a larger pool (randperm)."""
    g = torch.Generator().manual_seed(seed)
    max_pages = -(-max(lens) // page)
    pool_pages = len(lens) * max_pages + 3
    k = torch.randn(pool_pages, page, HKV, D, generator=g)
    v = torch.randn(pool_pages, page, HKV, D, generator=g)
    if kv_dtype == torch.float8_e4m3fn:
        k, v = (k * 4).to(kv_dtype), (v * 4).to(kv_dtype)  # use the e4m3 range, scale back below
    else:
        k, v = k.to(kv_dtype), v.to(kv_dtype)
    bt = torch.randperm(pool_pages, generator=g)[: len(lens) * max_pages]
    bt = bt.view(len(lens), max_pages).to(torch.int32)
    q = torch.randn(len(lens), HKV * group, D, generator=g).to(torch.bfloat16)
    return q, k, v, bt, torch.tensor(lens, dtype=torch.int32)


@pytest.mark.parametrize("page", [1, 16, 64])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn], ids=["bf16", "fp8"])
@pytest.mark.parametrize("splits", [1, 3])
def test_gqa_decode_matches_reference(page, group, kv_dtype, splits):
    lens = [1, 37, 130, 200]
    q, k, v, bt, seq = _case(page * 100 + group * 10 + splits, page, group, kv_dtype, lens)
    fp8 = kv_dtype == torch.float8_e4m3fn
    k_scale = torch.tensor([0.25, 0.125]) if fp8 else None  # per KV head
    v_scale = 0.25 if fp8 else None
    out = torch.full((len(lens), HKV * group, D), float("nan"), dtype=torch.bfloat16)
    gqa_decode(q, k, v, bt, seq, k_scale=k_scale, v_scale=v_scale, num_splits=splits, out=out)
    ref = gqa_decode_ref(q, k, v, bt, seq, k_scale=k_scale, v_scale=v_scale)
    assert_bf16_close(out, ref)


@pytest.mark.parametrize("window", [0, 5, 63, 1000])
@pytest.mark.parametrize("splits", [1, 4])
def test_gqa_decode_sliding_window(window, splits):
    q, k, v, bt, seq = _case(7 + window, 16, 4, torch.bfloat16, [3, 90, 177])
    out = gqa_decode(q, k, v, bt, seq, sliding_window=window, num_splits=splits, sm_scale=0.2)
    ref = gqa_decode_ref(q, k, v, bt, seq, sliding_window=window, sm_scale=0.2)
    assert_bf16_close(out, ref)


def test_gqa_decode_token_pool_layout_and_lse():
    """SGLang's 3-D [num_tokens, Hkv, D] pool with req_to_token rows as the block table."""
    q, k, v, bt, seq = _case(11, 1, 4, torch.bfloat16, [5, 64, 99])
    out, lse = gqa_decode(q, k[:, 0], v[:, 0], bt, seq, num_splits=2, return_lse=True)
    assert_bf16_close(out, gqa_decode_ref(q, k, v, bt, seq))
    # Reference lse: logsumexp of the scaled scores, recomputed directly in float64.
    for b in range(3):
        n = int(seq[b])
        keys = k[bt[b, :n].long(), 0].double().repeat_interleave(4, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].double(), keys) * D**-0.5
        # fp32 running max/sum in log2 units: relative error ~1e-6 of |lse| (a few units).
        torch.testing.assert_close(lse[b].double(), torch.logsumexp(s, -1), atol=1e-4, rtol=0)


def test_gqa_decode_fp32_query_is_tight():
    q, k, v, bt, seq = _case(5, 16, 8, torch.float32, [17, 150])
    q = q.float()
    out = gqa_decode(q, k, v, bt, seq, num_splits=3)
    ref = gqa_decode_ref(q, k, v, bt, seq)
    # All-fp32 path: only fp32 accumulation/exp2 rounding remains (~1e-6 relative).
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-5)


def test_gqa_decode_rejects_bad_shapes():
    q, k, v, bt, seq = _case(1, 16, 4, torch.bfloat16, [10])
    with pytest.raises(ValueError, match="multiple"):
        gqa_decode(q[:, :7], k, v, bt, seq)
    with pytest.raises(ValueError, match="max_seq_len=1010 is outside"):
        gqa_decode(q, k, v, bt, seq + 1000, max_seq_len=1010)
    with pytest.raises(ValueError, match="num_splits=65"):
        gqa_decode(q, k, v, bt, seq, num_splits=65)
    # Device lengths are never read on the host: one past what its block-table row addresses is
    # clamped in the kernel to the row (no read beyond it), equal to the clamped reference.
    cap = torch.full_like(seq, bt.shape[1] * k.shape[1])
    out = gqa_decode(q, k, v, bt, seq + 1000)
    assert_bf16_close(out, gqa_decode_ref(q, k, v, bt, cap))


def test_merge_splits_matches_reference_including_empty_splits():
    g = torch.Generator().manual_seed(3)
    o = torch.randn(6, 5, 48, generator=g)
    lse = torch.randn(6, 5, generator=g) * 4
    lse[0, 1:] = float("-inf")  # one non-empty split
    lse[1] = float("-inf")  # no token at all -> zeros
    out = torch.full((6, 48), float("nan"))
    lse_out = torch.empty(6)
    merge_splits(o, lse, out, lse_out)
    ref = merge_splits_ref(o, lse)
    # fp32 weights and sums over 5 splits: ~1e-6 relative.
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    assert torch.equal(out[1], torch.zeros(48)) and lse_out[1] == float("-inf")
    torch.testing.assert_close(lse_out[0], lse[0, 0])


@pytest.mark.parametrize("op", ["decode_gqa", "decode_mla", "decode_dsa", "decode_dsa_indexer"])
@pytest.mark.parametrize("arch", ["gfx950", "gfx942", "sm90", "sm100"])
def test_decode_configs_are_static_data_that_resolve(op, arch):
    table = json.loads((CONFIG_DIR / op / f"{arch}.json").read_text())
    assert table["_meta"]["source"] == "static" and "not measured" in table["_meta"]["how"].lower()
    cfg, tuned = get_config(op, arch, 48, "some_unknown_shape", lambda m: {})
    assert not tuned
    assert cfg["BLOCK_N"] >= 16 and cfg["target_programs"] > 0 and cfg["min_split_tokens"] > 0
