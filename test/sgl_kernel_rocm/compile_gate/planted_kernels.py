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
def dot_loop_kernel(a_ptr, b_ptr, out_ptr, k_dim, M: tl.constexpr, N: tl.constexpr,
                    K: tl.constexpr):  # fmt: skip
    # A bf16 M x N x K dot over a K loop; the case's tile, warps and stages plant the fault:
    # - spill: an M x N fp32 accumulator on one warp, far beyond its register file;
    # - LDS/SMEM: many pipeline stages of wide A and B tiles, each stage buffered;
    # - warp repetition: a 16 x 16 tile on 8 warps (each computes the same outputs);
    # - no v_mfma_scale / v_cvt_scalef32 on gfx950: a plain bf16 MFMA where the path exists
    #   for the scaled one.
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


@triton.jit
def unmarked_stream_kernel(w_ptr, out_ptr, n, stride):
    # The fault: the main loop's weight loads carry no `# stream:` marker (a refactor dropped it),
    # so nothing can be said about their width.
    rows = tl.arange(0, 64)
    cols = tl.arange(0, 64)
    acc = tl.zeros((64,), tl.int32)
    for k0 in range(0, n, 64):
        q = tl.load(w_ptr + rows[:, None] * stride + (k0 + cols)[None, :])
        acc += tl.sum(q.to(tl.int32), axis=1)
    tl.store(out_ptr + rows, acc)


@triton.jit
def soft_upcast_kernel(w_ptr, out_ptr):
    # The fault (where the hardware FP4 upcast exists): E2M1 codes decoded with integer ops.
    offs = tl.arange(0, 64)[:, None] * 32 + tl.arange(0, 32)[None, :]
    q = tl.load(w_ptr + offs)
    lo = (q & 7).to(tl.float32) * 0.5
    hi = ((q >> 4) & 7).to(tl.float32) * 0.5
    tl.store(out_ptr + offs, (lo + hi).to(tl.bfloat16))


@triton.jit
def scaled_dot_kernel(
    a_ptr, as_ptr, w_ptr, ws_ptr, out_ptr,
    A_FMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    # No fault: the control. One block-scaled tile, bf16 or e2m1 activations x e2m1 weights, so
    # gfx950 emits v_mfma_scale (e2m1 x e2m1) or v_cvt_scalef32 (the bf16 x e2m1 upcast).
    om = tl.arange(0, BLOCK_M)
    on = tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K // 32)
    if A_FMT == "e2m1":
        a = tl.load(a_ptr + om[:, None] * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)[None, :])
        a_scale = tl.load(as_ptr + om[:, None] * (BLOCK_K // 32) + ks[None, :])
    else:
        a = tl.load(a_ptr + om[:, None] * BLOCK_K + tl.arange(0, BLOCK_K)[None, :])
        a_scale = None
    wq = tl.load(w_ptr + on[:, None] * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)[None, :])
    ws = tl.load(ws_ptr + on[:, None] * (BLOCK_K // 32) + ks[None, :])
    acc = tl.dot_scaled(a, a_scale, A_FMT, tl.trans(wq), ws, "e2m1")
    tl.store(out_ptr + om[:, None] * BLOCK_N + on[None, :], acc)


@triton.jit
def twice_converted_kernel(q_ptr, kv_ptr, out_ptr, n):
    # The fault: one FP8 tile feeds two dots (as K^T for the scores, as V for the output)
    # through a float convert, which Triton copies into each dot operand's layout: the tile is
    # converted twice an iteration (what MLA decode did before attention/fp8_bits.py).
    offs_h = tl.arange(0, 16)
    offs_n = tl.arange(0, 64)
    offs_d = tl.arange(0, 128)
    q = tl.load(q_ptr + offs_h[:, None] * 128 + offs_d[None, :])
    acc = tl.zeros((16, 128), tl.float32)
    for n0 in range(0, n, 64):
        kv = tl.load(kv_ptr + (n0 + offs_n)[:, None] * 128 + offs_d[None, :])  # stream: kv
        kv = kv.to(tl.bfloat16)
        s = tl.dot(q, tl.trans(kv))
        acc += tl.dot(s.to(tl.bfloat16), kv)
    tl.store(out_ptr + offs_h[:, None] * 128 + offs_d[None, :], acc)
