"""Swap-AB of the fused MoE's GEMMs (config key "SWAP_AB", moe/_kernels.py `_mac`): the weights
take the MMA's M side and each GEMM accumulates the transposed tile, transposed once after the
K loop. In the interpreter: equal to the torch reference on every code path (word upcast in K
order and in the PTX's permuted order, per-element decode, dot_scaled W4A16 and W4A4, W4A4
unpack, bf16 weights), with split-K on both GEMMs, on both alignment grids; config validation;
the compile matrix's swap cases."""

from __future__ import annotations

import pytest
import torch
from moe_support import assert_moe_close, poison_buffers, record_launches
from sgl_kernel_rocm.moe import MoEWeights, fused_moe_bf16, fused_moe_mxfp4, triton_moe
from sgl_kernel_rocm.moe.config import swap_ab_of
from sgl_kernel_rocm.moe.synthetic import random_moe_inputs

# BLOCK_M != BLOCK_N, so a tile left untransposed cannot even be stored; I = 96 is ragged on
# BLOCK_N = 64 (the second N tile half full) and on BLOCK_K = 64 (EVEN_K off).
TOKENS, EXPERTS, HIDDEN, INTER, TOP_K = 5, 4, 192, 96, 2
SWAP = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1,
        "SWAP_AB": True}  # fmt: skip


def _inputs(dtype):
    seed = int(torch.randint(2**31, ()))
    x, w, tw, ti = random_moe_inputs(TOKENS, EXPERTS, HIDDEN, INTER, TOP_K, dtype=dtype, seed=seed)
    ti.view(-1)[3] = -1  # a masked slot
    return x, w, tw, ti


@pytest.mark.parametrize(
    "path,act_quant,extra,exact_align",
    [
        ("unpack", "none", {}, True),  # word upcast, K order
        ("unpack", "none", {"upcast": "ptx", "SPLIT_K": 2, "SPLIT_K_DOWN": 2}, False),
        ("dot_scaled", "none", {"SPLIT_K": 3}, True),
        ("dot_scaled", "mxfp4", {}, False),
        ("unpack", "mxfp4", {"SPLIT_K_DOWN": 2}, True),
    ],
    ids=[
        "unpack-words",
        "unpack-ptx-order-split2x2-worst_grid",
        "dot_scaled-a16-split3",
        "dot_scaled-a4-worst_grid",
        "unpack-a4-splitdown2",
    ],  # fmt: skip
)
def test_swap_ab_matches_reference(monkeypatch, path, act_quant, extra, exact_align):
    poison_buffers(monkeypatch)
    monkeypatch.setattr(triton_moe, "_EXACT_ALIGN_ON_CPU", exact_align)
    launched = record_launches(monkeypatch)
    x, w, tw, ti = _inputs(torch.bfloat16)
    shared = torch.randn(TOKENS, HIDDEN).to(torch.bfloat16)
    out = fused_moe_mxfp4(x, w, tw, ti, backend="triton", path=path, act_quant=act_quant,
                          config=SWAP | extra, shared_output=shared)  # fmt: skip
    # Both GEMMs ran swapped (an unswapped launch would match the reference as well).
    assert {k: v["SWAP_AB"] for k, v in launched.items()} == {
        "gate_up_swiglu_kernel": True,
        "down_kernel": True,
    }
    ref = fused_moe_mxfp4(x, w, tw, ti, backend="torch", act_quant=act_quant,
                          shared_output=shared)  # fmt: skip
    assert_moe_close(out, ref, shared, TOP_K)


def test_swap_ab_fp32_and_byte_decode_match_tightly(monkeypatch):
    """fp32 activations on byte loads (the per-element decode, no word upcast): only the
    summation order may differ from the reference."""
    poison_buffers(monkeypatch)
    x, w, tw, ti = _inputs(torch.float32)
    # An odd-offset view of the weights: rows not 4-byte aligned, so the kernels take bytes.
    w = MoEWeights(
        torch.cat([torch.zeros(1, dtype=torch.uint8), w.w13.flatten()])[1:].view_as(w.w13),
        w.w13_scale, w.w2, w.w2_scale,
    )  # fmt: skip
    assert w.w13.data_ptr() % 4
    out = fused_moe_mxfp4(x, w, tw, ti, backend="triton", path="unpack", config=SWAP)
    ref = fused_moe_mxfp4(x, w, tw, ti, backend="torch")
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5 * ref.abs().max().item())


def test_swap_ab_bf16_weights(monkeypatch):
    """The bf16-weight baseline (W16) on the swapped tile."""
    poison_buffers(monkeypatch)
    x, _, tw, ti = _inputs(torch.bfloat16)
    gen = torch.Generator().manual_seed(int(torch.randint(2**31, ())))
    inter = 128  # the bf16 weights' check wants multiples of 64
    dense = MoEWeights.dense(
        (torch.randn(EXPERTS, 2 * inter, HIDDEN, generator=gen) * 0.05).to(torch.bfloat16),
        (torch.randn(EXPERTS, HIDDEN, inter, generator=gen) * 0.05).to(torch.bfloat16),
    )
    out = fused_moe_bf16(x, dense, tw, ti, backend="triton", config=SWAP)
    ref = fused_moe_bf16(x, dense, tw, ti, backend="torch")
    assert_moe_close(out, ref, None, TOP_K)


def test_swap_ab_config_key():
    assert swap_ab_of({}) is False and swap_ab_of(SWAP) is True
    for bad in (1, 0, "true", None):
        with pytest.raises(ValueError, match="SWAP_AB"):
            swap_ab_of(SWAP | {"SWAP_AB": bad})
    with pytest.raises(ValueError, match="SWAP_AB"):
        fused_moe_mxfp4(*_inputs(torch.bfloat16), backend="triton", config=SWAP | {"SWAP_AB": 1})


def test_compile_cases_carry_the_swap():
    """The compile matrix builds what the launcher passes: SWAP_AB in both kernels' constexprs
    and in the label (so a swapped and an unswapped tile are two cases)."""
    from sgl_kernel_rocm.compile_check.cases import moe_pair

    shape = (256, 6144, 256)
    plain = {k: v for k, v in SWAP.items() if k != "SWAP_AB"}
    a = moe_pair("sm90", plain, *shape, "none", "unpack", "k", True)
    b = moe_pair("sm90", SWAP, *shape, "none", "unpack", "k", True)
    for c0, c1 in zip(a, b, strict=True):
        assert dict(c0.constexprs)["SWAP_AB"] is False and dict(c1.constexprs)["SWAP_AB"] is True
        assert "+swapab" in c1.label and "+swapab" not in c0.label and c0.key != c1.key


def test_decode_shaping_tries_swap_against_the_same_tile_unswapped():
    """At the decode buckets the shaping tries BLOCK_N 64 / 128 (and the bucket's) each
    unswapped and swapped, so a pick of SWAP_AB wins against the same BLOCK_N; above, the
    bucket's tile only."""
    from sgl_kernel_rocm.compile_check.decode_shaping import SWAP_MAX_TOKENS, tiles

    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}
    got = tiles(cfg, 1)
    assert got[0] == cfg  # ties keep the bucket's own tile
    pairs = {(c["BLOCK_N"], c.get("SWAP_AB", False)) for c in got}
    assert pairs == {(bn, sw) for bn in (32, 64, 128) for sw in (False, True)}
    assert len(got) == len(pairs)
    assert all(c["BLOCK_M"] == 16 and c["num_stages"] == 3 for c in got)
    assert tiles(cfg, SWAP_MAX_TOKENS + 1) == [cfg]
    # A bucket already swapped keeps its own first and is offered unswapped too.
    swapped = cfg | {"BLOCK_N": 64, "SWAP_AB": True}
    got = tiles(swapped, 4)
    assert got[0] == swapped and {k: v for k, v in swapped.items() if k != "SWAP_AB"} in got
