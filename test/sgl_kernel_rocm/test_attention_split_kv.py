"""The split-KV host path GQA, MLA and DSA decode share (attention/split_kv.py): any `out` view
with a contiguous last dim is written in place (rows of a wider buffer), a fully strided one
through a stand-in, with one split or several; what lies beside the view stays untouched."""

from __future__ import annotations

import pytest
import sgl_kernel_rocm.attention as attn
import torch
from attention_support import assert_bf16_close, scattered_pages

HEADS = 16


def _paged(g, dims, dtype, page=16, lens=(9, 70)):
    pages = -(-max(lens) // page)
    cache, bt = scattered_pages(g, len(lens) * pages + 2, page, dims, dtype, len(lens), pages)
    return cache, bt, torch.tensor(lens, dtype=torch.int32)


def _run(kind: str, g: torch.Generator, out: torch.Tensor, splits: int):
    """Launch `kind` into `out`; returns the float64 reference."""
    if kind == "gqa":
        k, bt, seq = _paged(g, (2, 64), torch.float8_e4m3fn)
        v = (torch.randn(k.shape, generator=g) * 4).to(torch.float8_e4m3fn)
        q = torch.randn(2, HEADS, 64, generator=g).to(torch.bfloat16)
        attn.gqa_decode(q, k, v, bt, seq, k_scale=0.25, v_scale=0.5, num_splits=splits, out=out)
        return attn.gqa_decode_ref(q, k, v, bt, seq, k_scale=0.25, v_scale=0.5)
    kv, bt, seq = _paged(g, (576,), torch.float8_e4m3fn)
    q = torch.randn(2, HEADS, 576, generator=g).to(torch.bfloat16)
    if kind == "mla":
        attn.mla_decode(q, kv, bt, seq, kv_scale=0.25, num_splits=splits, out=out)
        return attn.mla_decode_ref(q, kv, bt, seq, kv_scale=0.25)
    idx = torch.randint(-1, 72, (2, 40), generator=g, dtype=torch.int32)
    attn.dsa_sparse_decode(q, kv, bt, seq, idx, kv_scale=0.25, num_splits=splits, out=out)
    return attn.dsa_sparse_decode_ref(q, kv, bt, seq, idx, kv_scale=0.25)


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("kind", ["gqa", "mla", "dsa"])
@pytest.mark.parametrize("layout", ["wider_rows", "transposed"])
def test_decode_writes_a_strided_output_in_place(kind, splits, layout, _test_seed):
    g = torch.Generator().manual_seed(_test_seed)
    dv = 64 if kind == "gqa" else 512
    if layout == "wider_rows":  # [B, H, Dv] inside [B, H, Dv + 32]: row strides only
        wide = torch.full((2, HEADS, dv + 32), float("nan"), dtype=torch.bfloat16)
        out = wide[..., :dv]
    else:  # [B, H, Dv] as a transpose of [B, Dv, H]: the last dim is strided too
        wide = torch.full((2, dv, HEADS), float("nan"), dtype=torch.bfloat16)
        out = wide.transpose(1, 2)
    # Same values as the contiguous path: fp32 math, one bf16 ulp for the output store.
    assert_bf16_close(out, _run(kind, g, out, splits), f"{kind}, {layout}, {splits} split(s)")
    if layout == "wider_rows":
        assert torch.isnan(wide[..., dv:]).all(), "wrote past the view"
