"""Test-only launcher of `_kernels.dequant_words` (kernels must live in files to run in the
Triton interpreter)."""

from __future__ import annotations

import triton
import triton.language as tl
from sgl_kernel_rocm.moe._kernels import dequant_words


@triton.jit
def dequant_words_kernel(
    q_ptr, s_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr, FULL: tl.constexpr
):
    r = tl.arange(0, ROWS)
    w = tl.arange(0, COLS // 8)
    words = tl.load(q_ptr.to(tl.pointer_type(tl.int32)) + r[:, None] * (COLS // 8) + w[None, :])
    g = tl.arange(0, COLS // 32)
    scales = tl.load(s_ptr + r[:, None] * (COLS // 32) + g[None, :])
    # F32: the interpreter cannot bitcast to bf16; the fp32 container holds the same values.
    vals = dequant_words(words, scales, ROWS, COLS, FULL, True)
    tl.store(out_ptr + r[:, None] * COLS + tl.arange(0, COLS)[None, :], vals)
