"""Test-only launchers of the MoE FP4 upcast (`moe/_upcast.py`); kernels must live in files to
run in the Triton interpreter."""

from __future__ import annotations

import triton
import triton.language as tl
from sgl_kernel_rocm.moe._upcast import _pairs_tile, _scale_multiplier, upcast_words


@triton.jit
def upcast_words_kernel(
    q_ptr, s_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr, FULL: tl.constexpr,
    UPCAST: tl.constexpr = "triton", F32: tl.constexpr = True,
):  # fmt: skip
    r = tl.arange(0, ROWS)
    w = tl.arange(0, COLS // 8)
    words = tl.load(q_ptr.to(tl.pointer_type(tl.int32)) + r[:, None] * (COLS // 8) + w[None, :])
    g = tl.arange(0, COLS // 32)
    scales = tl.load(s_ptr + r[:, None] * (COLS // 32) + g[None, :])
    # F32: the interpreter cannot bitcast to bf16; the fp32 container holds the same values.
    vals = upcast_words(words, scales, ROWS, COLS, FULL, UPCAST, F32)
    tl.store(out_ptr + r[:, None] * COLS + tl.arange(0, COLS)[None, :], vals)


@triton.jit
def _byte_pair_bits(words, J: tl.constexpr):
    """What one `v_cvt_scalef32_pk_bf16_fp4` with byte select J puts out before its scale: byte
    J's low nibble in the low bf16, its high nibble in the high one (as 2**-126 x E2M1)."""
    b = (words >> (8 * J)) & 0xFF
    lo = ((b & 7) << 6) | ((b & 8) << 12)
    hi = (((b >> 4) & 7) << 22) | (((b >> 4) & 8) << 28)
    return lo | hi


@triton.jit
def gfx950_order_kernel(q_ptr, s_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """The gfx950 variant's assembly of its four converts' outputs (`_pairs_tile`), fed with a
    Triton stand-in of the convert, scaled like the full-range variant (fp32)."""
    r = tl.arange(0, ROWS)
    w = tl.arange(0, COLS // 8)
    words = tl.load(q_ptr.to(tl.pointer_type(tl.int32)) + r[:, None] * (COLS // 8) + w[None, :])
    g = tl.arange(0, COLS // 32)
    scales = tl.load(s_ptr + r[:, None] * (COLS // 32) + g[None, :]).to(tl.int32)
    tile = _pairs_tile(
        _byte_pair_bits(words, 0), _byte_pair_bits(words, 1), _byte_pair_bits(words, 2),
        _byte_pair_bits(words, 3), ROWS, COLS, True,
    )  # fmt: skip
    vals = tl.reshape(tile, (ROWS, COLS // 32, 32))
    vals = vals * _scale_multiplier(tl.full((1, 1, 1), 127, tl.int32), False, True)
    vals = vals * _scale_multiplier(scales, True, True)[:, :, None]
    offs = r[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, tl.reshape(vals, (ROWS, COLS)))
