"""Kernels planted with the faults the compile gate exists to catch (test data, never shipped).

Each is built by test_compile_gate.py through the same compile_check machinery as the package's
kernels; the gate must name the fault for each, or it could pass silently.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _two_types(x, FLAG: tl.constexpr):
    # The fault: a constexpr-if branch returns early with another type (and None in a tuple).
    if FLAG:
        return x, None
    return x.to(tl.float32), x


@triton.jit
def multi_type_return_kernel(x_ptr, out_ptr, FLAG: tl.constexpr):
    offs = tl.arange(0, 64)
    a, _ = _two_types(tl.load(x_ptr + offs), FLAG)
    tl.store(out_ptr + offs, a)


@triton.jit
def spilling_kernel(a_ptr, b_ptr, out_ptr, k_dim, M: tl.constexpr, N: tl.constexpr,
                    K: tl.constexpr):  # fmt: skip
    # The fault: an M x N fp32 accumulator that lives across a K loop on one warp, far beyond
    # its register file.
    om = tl.arange(0, M)
    on = tl.arange(0, N)
    ok = tl.arange(0, K)
    acc = tl.zeros((M, N), tl.float32)
    for k0 in range(0, k_dim, K):
        a = tl.load(a_ptr + om[:, None] * k_dim + (k0 + ok)[None, :])
        b = tl.load(b_ptr + (k0 + ok)[:, None] * N + on[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + om[:, None] * N + on[None, :], acc)


@triton.jit
def narrow_stream_kernel(w_ptr, out_ptr, n, stride):
    # The fault: a per-element K mask on a runtime bound keeps the weight loads to single bytes.
    rows = tl.arange(0, 64)
    cols = tl.arange(0, 64)
    acc = tl.zeros((64,), tl.int32)
    for k0 in range(0, n, 64):
        q = tl.load(  # stream: weights
            w_ptr + rows[:, None] * stride + (k0 + cols)[None, :],
            mask=(k0 + cols)[None, :] < n,
            other=0,
        )
        acc += tl.sum(q.to(tl.int32), axis=1)
    tl.store(out_ptr + rows, acc)
