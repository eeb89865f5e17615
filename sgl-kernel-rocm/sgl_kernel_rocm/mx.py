"""OCP Microscaling v1.0 MXFP4: quantize to / dequantize from packed E2M1 with E8M0 block scales.

Format (one block = 32 consecutive elements along `axis`):
  scale  uint8 E8M0, value 2**(s - 127); 0xFF is NaN.
  element FP4 E2M1 {0, 0.5, 1, 1.5, 2, 3, 4, 6} with a sign bit; two per byte, even element in
  the low nibble.

Quantization follows the spec's algorithm: shared_exp = floor(log2(amax)) - 2 (emax of E2M1),
clamped to the E8M0 range [-127, 127]; elements are x / 2**shared_exp rounded to nearest even and
saturated to +-6. A block holding NaN or +-Inf gets the NaN scale 0xFF (E2M1 has no encoding
for either) and zero element codes. An all-zero block gets scale 0x00 (2**-127) and zero codes.
The sign of values that round to zero is kept (-0.1 * 2**e -> code 0x8), as RNE prescribes.

`quantize_mxfp4` / `dequantize_mxfp4` are the torch reference, used on any device. The Triton
kernel for dynamic activation quantization (W4A4) is `quantize_mxfp4_triton`.
"""

from __future__ import annotations

import torch

BLOCK = 32
E8M0_NAN = 0xFF
E8M0_BIAS = 127
# Magnitudes of the 8 positive E2M1 codes, indexed by code & 7.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0


def _check_axis(x: torch.Tensor, axis: int, divisor: int, what: str) -> int:
    if x.dim() == 0:
        raise ValueError(f"{what}: expected a tensor with at least one dimension, got a scalar")
    axis = axis % x.dim()
    if x.shape[axis] % divisor:
        raise ValueError(
            f"{what}: size {x.shape[axis]} of axis {axis} (shape {tuple(x.shape)}) is not a "
            f"multiple of {divisor}; MXFP4 needs whole blocks of {BLOCK} elements along the "
            "quantized axis (pad the tensor first)"
        )
    return axis


def e2m1_round_codes(v: torch.Tensor) -> torch.Tensor:
    """Round |v| (fp32, already divided by the block scale) to an E2M1 magnitude code 0..7.

    Thresholds are the midpoints of the E2M1 grid; at an exact midpoint the even code wins
    (`>=` where the upper neighbour's code is even, `>` where it is odd).
    """
    a = v.abs()
    code = (
        (a > 0.25).to(torch.uint8)
        + (a >= 0.75)
        + (a > 1.25)
        + (a >= 1.75)
        + (a > 2.5)
        + (a >= 3.5)
        + (a > 5.0)
    )
    return code.to(torch.uint8)


def _shared_exponent(amax: torch.Tensor) -> torch.Tensor:
    """floor(log2(amax)) - 2 clamped to [-127, 127], from the fp32 exponent bits (exact)."""
    biased = (amax.view(torch.int32) >> 23) & 0xFF
    # Subnormal amax has biased exponent 0 -> -129 after the shift, clamped to -127 below.
    return (biased - 127 - 2).clamp(-E8M0_BIAS, E8M0_BIAS)


def quantize_mxfp4(x: torch.Tensor, axis: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize `x` to MXFP4 along `axis`.

    Returns (packed, scales): packed is uint8 with size(axis) // 2 (two E2M1 codes per byte, even
    element in the low nibble), scales is uint8 E8M0 with size(axis) // 32. Other dims unchanged.
    """
    axis = _check_axis(x, axis, BLOCK, "quantize_mxfp4")
    xm = x.detach().movedim(axis, -1).to(torch.float32)
    lead = xm.shape[:-1]
    n = xm.shape[-1]
    blocks = xm.reshape(*lead, n // BLOCK, BLOCK)

    finite = torch.isfinite(blocks)
    bad_block = ~finite.all(dim=-1)
    amax = torch.where(finite, blocks.abs(), torch.zeros_like(blocks)).amax(dim=-1)
    shared = _shared_exponent(amax.contiguous())
    # 2**(-shared) built from exponent bits: -shared is in [-127, 127] -> biased 0..254; the one
    # non-normal case (-shared = -127 -> biased 0) cannot happen since shared <= 125 for fp32.
    inv_scale = ((E8M0_BIAS - shared).to(torch.int32) << 23).view(torch.float32)
    v = torch.where(finite, blocks, torch.zeros_like(blocks)) * inv_scale.unsqueeze(-1)
    codes = e2m1_round_codes(v) | (torch.signbit(v).to(torch.uint8) << 3)
    codes = torch.where(bad_block.unsqueeze(-1), torch.zeros_like(codes), codes)
    scales = torch.where(bad_block, torch.full_like(shared, E8M0_NAN), shared + E8M0_BIAS).to(
        torch.uint8
    )

    codes = codes.reshape(*lead, n // 2, 2)
    packed = codes[..., 0] | (codes[..., 1] << 4)
    return packed.movedim(-1, axis).contiguous(), scales.movedim(-1, axis).contiguous()


def e8m0_to_float(scales: torch.Tensor) -> torch.Tensor:
    """E8M0 bytes -> fp32 2**(s - 127); 0xFF -> NaN; 0x00 -> 2**-127 (an fp32 subnormal)."""
    s = scales.to(torch.int32)
    normal = (s << 23).view(torch.float32)
    sub = torch.full_like(normal, 2.0**-127)
    out = torch.where(s == 0, sub, normal)
    return torch.where(s == E8M0_NAN, torch.full_like(out, float("nan")), out)


def _e2m1_pair_lut(device: torch.device) -> torch.Tensor:
    """[256, 2] fp32: the two E2M1 values (low nibble first) of every byte."""
    mags = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)
    lut = torch.cat([mags, -mags])
    byte = torch.arange(256, device=device)
    return torch.stack([lut[byte & 0xF], lut[byte >> 4]], dim=-1)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., n/2] -> fp32 [..., n] E2M1 values (unscaled); even element = low nibble."""
    # embedding is the fastest row gather on CPU; one lookup yields both nibbles of a byte.
    pairs = torch.nn.functional.embedding(packed.to(torch.int32), _e2m1_pair_lut(packed.device))
    return pairs.reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def dequantize_mxfp4(
    packed: torch.Tensor,
    scales: torch.Tensor,
    axis: int = -1,
    dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """Inverse of `quantize_mxfp4`: -> tensor of `dtype` with size(axis) = 2 * packed.size(axis)."""
    if packed.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise ValueError(
            f"dequantize_mxfp4: packed and scales must be uint8, got {packed.dtype} and "
            f"{scales.dtype}"
        )
    axis = axis % max(packed.dim(), 1)
    pm = packed.movedim(axis, -1)
    sm = scales.movedim(axis, -1)
    n = pm.shape[-1] * 2
    if pm.shape[:-1] != sm.shape[:-1] or sm.shape[-1] * BLOCK != n:
        raise ValueError(
            f"dequantize_mxfp4: scales shape {tuple(scales.shape)} does not match packed shape "
            f"{tuple(packed.shape)} (expected one scale per {BLOCK} elements along axis {axis})"
        )
    vals = unpack_e2m1(pm).reshape(*pm.shape[:-1], n // BLOCK, BLOCK)
    out = vals * e8m0_to_float(sm).unsqueeze(-1)
    return out.reshape(*pm.shape[:-1], n).to(dtype).movedim(-1, axis).contiguous()


def quantize_mxfp4_triton(
    x: torch.Tensor, out: tuple[torch.Tensor, torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton kernel for dynamic activation quantization along the last axis of a 2-D tensor.

    Same bytes as `quantize_mxfp4(x, -1)`. Runs on GPU tensors, or on CPU tensors under
    TRITON_INTERPRET=1.
    """
    from sgl_kernel_rocm._mx_triton import quantize_rows

    if x.dim() != 2:
        raise ValueError(
            f"quantize_mxfp4_triton: expected a 2-D [rows, cols] tensor, got {x.dim()}-D"
        )
    _check_axis(x, -1, BLOCK, "quantize_mxfp4_triton")
    return quantize_rows(x, out=out)
