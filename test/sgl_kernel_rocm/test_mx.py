"""MXFP4 quantizer: bit-exact hand vectors, round-trip bound (hypothesis), Triton kernel."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sgl_kernel_rocm.mx import dequantize_mxfp4, quantize_mxfp4, quantize_mxfp4_triton


def _block(values: list[float]) -> torch.Tensor:
    """One 32-element block: the given values followed by zeros."""
    return torch.tensor(values + [0.0] * (32 - len(values)), dtype=torch.float32)


def _codes(packed: torch.Tensor) -> list[int]:
    """Unpack bytes to the E2M1 code list (low nibble = even element)."""
    out = []
    for b in packed.tolist():
        out += [b & 0xF, b >> 4]
    return out


def test_round_to_nearest_even_at_every_midpoint():
    # amax 7 -> floor(log2 7) - 2 = 0 -> scale 2**0 (E8M0 127); values are used unscaled.
    x = _block([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0, -0.1, -0.75, 0.3])
    packed, scales = quantize_mxfp4(x)
    assert scales.tolist() == [127]
    # Midpoints go to the even code: 0.25->0, 0.75->1.0 (2), 1.25->1.0 (2), 1.75->2 (4),
    # 2.5->2 (4), 3.5->4 (6), 5->4 (6); 6->6 (7); 7 saturates to 6 (7); -0.1 -> -0 (8);
    # -0.75 -> -1.0 (0xA); 0.3 -> 0.5 (1).
    assert _codes(packed)[:12] == [0, 2, 2, 4, 4, 6, 6, 7, 7, 8, 0xA, 1]
    assert _codes(packed)[12:] == [0] * 20


def test_scale_is_floor_log2_amax_minus_two():
    # amax 1.0 -> 2**-2 (125); 0.3 / 0.25 = 1.2 -> 1.0 (code 2); 1.0 / 0.25 = 4 (code 6).
    packed, scales = quantize_mxfp4(_block([0.3, 1.0]))
    assert scales.tolist() == [125]
    assert _codes(packed)[:2] == [2, 6]
    # amax just below 2**3 (7.99) keeps scale 2**0 and saturates to 6.
    packed, scales = quantize_mxfp4(_block([7.99, -7.99]))
    assert scales.tolist() == [127]
    assert _codes(packed)[:2] == [7, 0xF]


def test_zero_block_and_subnormal_range():
    packed, scales = quantize_mxfp4(torch.zeros(64))
    # All-zero block: log2(0) = -inf clamps to the smallest scale 2**-127 (E8M0 0).
    assert scales.tolist() == [0, 0]
    assert packed.tolist() == [0] * 32
    # fp32 subnormals (amax 2**-130): the exponent clamps at -127, so 2**-130 / 2**-127 = 1/8
    # rounds to 0 and 2**-128 / 2**-127 = 0.5 is code 1.
    x = _block([2.0**-130, 2.0**-128, -(2.0**-128)])
    packed, scales = quantize_mxfp4(x)
    assert scales.tolist() == [0]
    assert _codes(packed)[:3] == [0, 1, 9]
    assert dequantize_mxfp4(packed, scales, dtype=torch.float32)[1].item() == 2.0**-128


def test_max_magnitude_block():
    fmax = torch.finfo(torch.float32).max  # 2**128 * (1 - 2**-24): floor(log2) = 127
    packed, scales = quantize_mxfp4(_block([fmax, -fmax, 2.0**126]))
    assert scales.tolist() == [125 + 127]
    # fmax / 2**125 ~ 8 saturates to 6 (code 7); 2**126 / 2**125 = 2 (code 4).
    assert _codes(packed)[:3] == [7, 0xF, 4]
    back = dequantize_mxfp4(packed, scales, dtype=torch.float32)
    assert back[0].item() == 6.0 * 2.0**125


@pytest.mark.parametrize("special", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_inf_blocks_get_nan_scale(special):
    x = torch.randn(64)
    x[40] = special
    packed, scales = quantize_mxfp4(x)
    # E2M1 has no NaN/Inf: the block's scale becomes the E8M0 NaN (0xFF); the other block is
    # untouched.
    assert scales[1].item() == 0xFF
    assert scales[0].item() != 0xFF
    assert packed[16:].tolist() == [0] * 16
    back = dequantize_mxfp4(packed, scales, dtype=torch.float32)
    assert torch.isnan(back[32:]).all()
    assert torch.isfinite(back[:32]).all()


def test_dequantize_hand_vector():
    # Byte 0x7A: low nibble 0xA = -1.0, high nibble 0x7 = 6.0; scale 128 = 2**1.
    packed = torch.tensor([[0x7A] + [0] * 15], dtype=torch.uint8)
    scales = torch.tensor([[128]], dtype=torch.uint8)
    out = dequantize_mxfp4(packed, scales, dtype=torch.float32)
    assert out[0, :2].tolist() == [-2.0, 12.0]
    assert out[0, 2:].abs().sum().item() == 0.0


def test_shapes_axis_and_errors():
    x = torch.randn(3, 64, 5)
    packed, scales = quantize_mxfp4(x, axis=1)
    assert packed.shape == (3, 32, 5) and scales.shape == (3, 2, 5)
    p2, s2 = quantize_mxfp4(x.transpose(1, 2), axis=-1)
    assert torch.equal(packed, p2.transpose(1, 2)) and torch.equal(scales, s2.transpose(1, 2))
    back = dequantize_mxfp4(packed, scales, axis=1, dtype=torch.float32)
    assert back.shape == x.shape
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize_mxfp4(torch.randn(4, 48))


def _block_error_bound(x: torch.Tensor) -> torch.Tensor:
    """Per-element bound on |x - dq(q(x))| for one block, from the format itself.

    With X = 2**(floor(log2 amax) - 2) the scaled values are < 8; on [0, 6] the worst rounding
    error is half the widest E2M1 gap (4 -> 6), i.e. X; above 6 saturation costs amax - 6X.
    """
    amax = x.abs().max().item()
    if amax == 0:
        return torch.zeros_like(x)
    e = max(math.floor(math.log2(amax)) - 2, -127)
    X = 2.0**e
    return torch.full_like(x, max(X, amax - 6 * X))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.floats(min_value=-(2.0**80), max_value=2.0**80, allow_nan=False, width=32),
        min_size=32,
        max_size=32,
    ),
    st.integers(min_value=-40, max_value=40),
)
def test_round_trip_error_bound(values, shift):
    x = torch.tensor(values, dtype=torch.float32) * 2.0**shift
    x = torch.nan_to_num(x, posinf=0.0, neginf=0.0)
    packed, scales = quantize_mxfp4(x)
    back = dequantize_mxfp4(packed, scales, dtype=torch.float32)
    assert (back - x).abs().le(_block_error_bound(x)).all()
    # Rounding never flips a sign.
    assert ((back * x) >= 0).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_low_precision_inputs_match_fp32_path(dtype):
    x = torch.randn(4, 64).to(dtype)
    p, s = quantize_mxfp4(x)
    p32, s32 = quantize_mxfp4(x.float())
    # bf16/fp16 -> fp32 is exact, so the bytes must be identical.
    assert torch.equal(p, p32) and torch.equal(s, s32)


@pytest.mark.parametrize("shape", [(1, 32), (37, 96), (5, 512)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_triton_quantizer_bit_exact(shape, dtype):
    x = (torch.randn(shape) * torch.logspace(-3, 3, shape[1])).to(dtype)
    x[0, 3] = float("nan")
    if shape[0] > 1:
        x[1, :32] = 0.0
    # Poisoned outputs: any byte the kernel fails to write shows up as a mismatch.
    q = torch.full((shape[0], shape[1] // 2), 0xAB, dtype=torch.uint8)
    s = torch.full((shape[0], shape[1] // 32), 0xAB, dtype=torch.uint8)
    quantize_mxfp4_triton(x, out=(q, s))
    ref_q, ref_s = quantize_mxfp4(x)
    assert torch.equal(q, ref_q)
    assert torch.equal(s, ref_s)
