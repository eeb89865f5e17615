"""The load-time weight layout check (`sgl_kernel_rocm.moe.layout`): its flags, the fused MoE
with a layout on both upcast variants and on byte loads, `dot_scaled` with `fast_math`, the
bf16-weight baseline. The upcast itself: test_moe_upcast.py."""

from __future__ import annotations

import pytest
import torch
from sgl_kernel_rocm.moe import MoEWeights, fused_moe_mxfp4, prepare_weights
from sgl_kernel_rocm.moe.layout import FAST_SCALE_MAX, MoEWeightLayout
from test_moe import _make_case


def test_prepare_weights_flags():
    _, w, _, _ = _make_case(1, 4, 64, 64, 2, torch.bfloat16, seed=3)
    w13, s13, w2, s2 = w.w13, w.w13_scale, w.w2, w.w2_scale
    assert prepare_weights(w) == MoEWeightLayout(fast_scales=True, words=True)
    big = s2.clone()
    big[1, 2, 0] = FAST_SCALE_MAX + 1
    assert not prepare_weights(MoEWeights(w13, s13, w2, big)).fast_scales
    nan = s13.clone()
    nan[0, 0, 0] = 255
    assert not prepare_weights(MoEWeights(w13, nan, w2, s2)).fast_scales
    # A view starting 2 bytes in cannot be read as aligned int32 words.
    odd = torch.zeros(w2.numel() + 2, dtype=torch.uint8)[2:].view(w2.shape)
    assert not prepare_weights(MoEWeights(w13, s13, odd, s2)).words
    with pytest.raises(ValueError, match="uint8"):
        prepare_weights(MoEWeights(w13, s13.float(), w2, s2))


@pytest.mark.parametrize("weight_scale", [0.1, 3000.0], ids=["fast_scales", "full_range"])
def test_fused_moe_with_layout_matches_reference(weight_scale):
    t, e, h, i, k = 9, 4, 64, 64, 2
    gen = torch.Generator().manual_seed(11)
    case = list(_make_case(t, e, h, i, k, torch.float32, seed=11))
    # Rescale the weights (re-quantized) so the scales fall on either side of the fast limit.
    from sgl_kernel_rocm.mx import quantize_mxfp4

    w13, s13 = quantize_mxfp4(torch.randn(e, 2 * i, h, generator=gen) * weight_scale)
    w2, s2 = quantize_mxfp4(torch.randn(e, h, i, generator=gen) * 0.1)
    case[1] = MoEWeights(w13, s13, w2, s2)
    layout = prepare_weights(case[1])
    assert layout.fast_scales == (weight_scale < 1)
    ref = fused_moe_mxfp4(*case, backend="torch")
    out = fused_moe_mxfp4(*case, backend="triton", path="unpack", layout=layout)
    scale = ref.abs().max().item()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5 * scale)
    # The byte-wise upcast (unaligned weights) gives the same result.
    bytewise = MoEWeightLayout(fast_scales=layout.fast_scales, words=False)
    out_b = fused_moe_mxfp4(*case, backend="triton", path="unpack", layout=bytewise)
    torch.testing.assert_close(out_b, ref, rtol=1e-4, atol=1e-5 * scale)


def test_bf16_weight_baseline_matches_reference():
    from sgl_kernel_rocm.moe import fused_moe_bf16

    t, e, h, i, k = 7, 4, 64, 64, 2
    gen = torch.Generator().manual_seed(5)
    x, *_, tw, ti = _make_case(t, e, h, i, k, torch.float32, masked=2, seed=5)
    w13 = (torch.randn(e, 2 * i, h, generator=gen) * 0.1).to(torch.bfloat16)
    w2 = (torch.randn(e, h, i, generator=gen) * 0.1).to(torch.bfloat16)
    w = MoEWeights.dense(w13, w2)
    shared = torch.randn(t, h, generator=gen)
    out = fused_moe_bf16(x, w, tw, ti, backend="triton", shared_output=shared)
    ref = fused_moe_bf16(x, w, tw, ti, backend="torch", shared_output=shared)
    scale = ref.abs().max().item()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5 * scale)
    with pytest.raises(ValueError, match="bf16 or fp16"):
        fused_moe_bf16(x, MoEWeights.dense(w13.float(), w2), tw, ti)
    with pytest.raises(ValueError, match="dense"):
        fused_moe_bf16(x, _make_case(t, e, h, i, k, torch.float32, seed=5)[1], tw, ti)


def test_dot_scaled_with_layout_matches_reference():
    # W4A16 dot_scaled with a layout takes fast_math (no NaN scales, checked at load).
    t, e, h, i, k = 5, 4, 64, 64, 2
    case = _make_case(t, e, h, i, k, torch.bfloat16, seed=8)
    layout = prepare_weights(case[1])
    assert layout.fast_scales
    out = fused_moe_mxfp4(*case, backend="triton", path="dot_scaled", layout=layout)
    ref = fused_moe_mxfp4(*case, backend="torch")
    scale = ref.float().abs().max().item()
    # Bound of test_moe.test_triton_matches_reference_bf16 (bf16 per-slot rows, k = 2).
    assert (out.float() - ref.float()).abs().max().item() <= (k + 2) * 2.0**-8 * scale
