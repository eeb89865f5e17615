"""Triton bodies of the fused MXFP4 MoE: grouped gate_up GEMM + SwiGLU, grouped down GEMM with the
top-k weight. Callers use `sgl_kernel_rocm.moe.fused_moe_mxfp4`.

Each program owns BLOCK_M aligned slots of one expert (see align.py) and BLOCK_N output columns.
Two code paths, picked by the DOT_SCALED constexpr:
  dot_scaled: packed E2M1 + E8M0 tiles go straight into tl.dot_scaled (block-scaled MFMA/MMA
              on gfx950/sm100; Triton emulates it elsewhere).
  unpack:     nibbles are decoded and scaled in registers, then a plain tl.dot.
"""

from __future__ import annotations

import triton
import triton.language as tl

from sgl_kernel_rocm._mx_triton import quantize_tile


@triton.jit
def dequant_tile(packed, scales, ROWS: tl.constexpr, COLS: tl.constexpr):
    """packed uint8 [ROWS, COLS // 2] + E8M0 [ROWS, COLS // 32] -> fp32 [ROWS, COLS]."""
    lo = packed & 0xF
    hi = (packed >> 4) & 0xF
    codes = tl.reshape(tl.join(lo, hi), (ROWS, COLS)).to(tl.int32)
    exp = (codes >> 1) & 3
    man = (codes & 1).to(tl.float32)
    # E2M1: exponent field 0 is subnormal (0 or 0.5), else 2**(e-1) * (1 + m/2).
    mag = tl.where(
        exp == 0, man * 0.5, (1.0 + man * 0.5) * (1 << tl.maximum(exp - 1, 0)).to(tl.float32)
    )
    val = tl.where((codes & 8) != 0, -mag, mag)
    s = scales.to(tl.int32)
    scale = tl.where(s == 0, 2.0**-127, (s << 23).to(tl.float32, bitcast=True))
    scale = tl.where(s == 255, float("nan"), scale)
    val = tl.reshape(val, (ROWS, COLS // 32, 32)) * scale[:, :, None]
    return tl.reshape(val, (ROWS, COLS))


@triton.jit
def round_bf16_rne(x, MANUAL_BF16_RNE: tl.constexpr):
    """fp32 -> fp32 holding the nearest-even bf16 value when MANUAL_BF16_RNE: the interpreter's
    fp32 -> bf16 cast truncates, while GPUs round to nearest even (then the flag is off)."""
    if MANUAL_BF16_RNE:
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        x = bits.to(tl.float32, bitcast=True)
    return x


@triton.jit
def _load_a(
    x_ptr,
    xq_ptr,
    xs_ptr,
    rows,
    row_ok,
    offs_k,
    k0,
    K_DIM,
    stride_x,
    stride_xq,
    stride_xs,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    A4: tl.constexpr,
    DOT_SCALED: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    """Activation tile: plain [BM, BK] (A16), or packed [BM, BK/2] + scales (A4)."""
    if A4:
        offs_h = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        offs_s = k0 // 32 + tl.arange(0, BLOCK_K // 32)
        q = tl.load(
            xq_ptr + rows[:, None] * stride_xq + offs_h[None, :],
            mask=row_ok[:, None] & (offs_h[None, :] < K_DIM // 2),
            other=0,
        )
        s = tl.load(
            xs_ptr + rows[:, None] * stride_xs + offs_s[None, :],
            mask=row_ok[:, None] & (offs_s[None, :] < K_DIM // 32),
            other=127,
        )
        if DOT_SCALED:
            return q, s
        return dequant_tile(q, s, BLOCK_M, BLOCK_K).to(DOT_DTYPE), s
    a = tl.load(
        x_ptr + rows[:, None] * stride_x + (k0 + offs_k)[None, :],
        mask=row_ok[:, None] & ((k0 + offs_k)[None, :] < K_DIM),
        other=0.0,
    )
    if DOT_SCALED:
        return a, None
    return a.to(DOT_DTYPE), None


@triton.jit
def _load_w(
    w_ptr,
    ws_ptr,
    n_rows,
    n_ok,
    k0,
    K_DIM,
    stride_wn,
    stride_wsn,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Weight tile of one expert: packed [BN, BK/2] + scales [BN, BK/32] (pointers pre-offset)."""
    offs_h = k0 // 2 + tl.arange(0, BLOCK_K // 2)
    offs_s = k0 // 32 + tl.arange(0, BLOCK_K // 32)
    q = tl.load(
        w_ptr + n_rows[:, None] * stride_wn + offs_h[None, :],
        mask=n_ok[:, None] & (offs_h[None, :] < K_DIM // 2),
        other=0,
    )
    s = tl.load(
        ws_ptr + n_rows[:, None] * stride_wsn + offs_s[None, :],
        mask=n_ok[:, None] & (offs_s[None, :] < K_DIM // 32),
        other=127,
    )
    return q, s


@triton.jit
def _mac(
    acc,
    a,
    a_scale,
    wq,
    ws,
    A_FMT: tl.constexpr,
    DOT_SCALED: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    """acc += a @ dequant(w)^T through the chosen code path."""
    if DOT_SCALED:
        return tl.dot_scaled(a, a_scale, A_FMT, tl.trans(wq), ws, "e2m1", acc)
    w = dequant_tile(wq, ws, BLOCK_N, BLOCK_K).to(DOT_DTYPE)
    return tl.dot(a, tl.trans(w), acc)


@triton.jit
def gate_up_swiglu_kernel(
    x_ptr,
    xq_ptr,
    xs_ptr,
    w_ptr,
    ws_ptr,
    out_ptr,
    outq_ptr,
    outs_ptr,
    sorted_ids_ptr,
    block_expert_ptr,
    num_padded_ptr,
    n_slots,
    top_k,
    H,
    INTER,
    stride_x,
    stride_xq,
    stride_xs,
    stride_we,
    stride_wn,
    stride_wse,
    stride_wsn,
    stride_out,
    stride_outq,
    stride_outs,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    A4: tl.constexpr,
    DOT_SCALED: tl.constexpr,
    A_FMT: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    MANUAL_BF16_RNE: tl.constexpr,
):
    """out[slot, n] = silu(x[tok] . Wg[e, n]) * (x[tok] . Wu[e, n]); A4 also stores it as MXFP4."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ids_ptr + offs_m)
    row_ok = slot < n_slots
    tok = tl.where(row_ok, slot // top_k, 0)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < INTER
    offs_k = tl.arange(0, BLOCK_K)
    w_e = w_ptr + expert * stride_we
    ws_e = ws_ptr + expert * stride_wse

    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        a, a_s = _load_a(
            x_ptr,
            xq_ptr,
            xs_ptr,
            tok,
            row_ok,
            offs_k,
            k0,
            H,
            stride_x,
            stride_xq,
            stride_xs,
            BLOCK_M,
            BLOCK_K,
            A4,
            DOT_SCALED,
            DOT_DTYPE,
        )
        gq, gs = _load_w(w_e, ws_e, offs_n, n_ok, k0, H, stride_wn, stride_wsn, BLOCK_N, BLOCK_K)
        uq, us = _load_w(
            w_e, ws_e, offs_n + INTER, n_ok, k0, H, stride_wn, stride_wsn, BLOCK_N, BLOCK_K
        )
        acc_g = _mac(acc_g, a, a_s, gq, gs, A_FMT, DOT_SCALED, BLOCK_N, BLOCK_K, DOT_DTYPE)
        acc_u = _mac(acc_u, a, a_s, uq, us, A_FMT, DOT_SCALED, BLOCK_N, BLOCK_K, DOT_DTYPE)

    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    # Round to the storage dtype first so A4 quantizes exactly what an A16 pass would store.
    act = round_bf16_rne(act, MANUAL_BF16_RNE).to(out_ptr.dtype.element_ty)
    mask = row_ok[:, None] & n_ok[None, :]
    if A4:
        packed, scales = quantize_tile(act.to(tl.float32), BLOCK_M, BLOCK_N)
        offs_q = pid_n * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
        offs_s = pid_n * (BLOCK_N // 32) + tl.arange(0, BLOCK_N // 32)
        tl.store(
            outq_ptr + slot[:, None] * stride_outq + offs_q[None, :],
            packed,
            mask=row_ok[:, None] & (offs_q[None, :] < INTER // 2),
        )
        tl.store(
            outs_ptr + slot[:, None] * stride_outs + offs_s[None, :],
            scales,
            mask=row_ok[:, None] & (offs_s[None, :] < INTER // 32),
        )
    else:
        tl.store(out_ptr + slot[:, None] * stride_out + offs_n[None, :], act, mask=mask)


@triton.jit
def down_kernel(
    a_ptr,
    aq_ptr,
    as_ptr,
    w_ptr,
    ws_ptr,
    topk_w_ptr,
    out_ptr,
    sorted_ids_ptr,
    block_expert_ptr,
    num_padded_ptr,
    n_slots,
    H,
    INTER,
    stride_a,
    stride_aq,
    stride_as,
    stride_we,
    stride_wn,
    stride_wse,
    stride_wsn,
    stride_out,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    A4: tl.constexpr,
    DOT_SCALED: tl.constexpr,
    A_FMT: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    MANUAL_BF16_RNE: tl.constexpr,
):
    """out[slot, n] = topk_w[slot] * (act[slot] . W2[e, n]); the sum over slots is done after."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ids_ptr + offs_m)
    row_ok = slot < n_slots
    rows = tl.where(row_ok, slot, 0)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < H
    offs_k = tl.arange(0, BLOCK_K)
    w_e = w_ptr + expert * stride_we
    ws_e = ws_ptr + expert * stride_wse

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, INTER, BLOCK_K):
        a, a_s = _load_a(
            a_ptr,
            aq_ptr,
            as_ptr,
            rows,
            row_ok,
            offs_k,
            k0,
            INTER,
            stride_a,
            stride_aq,
            stride_as,
            BLOCK_M,
            BLOCK_K,
            A4,
            DOT_SCALED,
            DOT_DTYPE,
        )
        wq, ws = _load_w(
            w_e, ws_e, offs_n, n_ok, k0, INTER, stride_wn, stride_wsn, BLOCK_N, BLOCK_K
        )
        acc = _mac(acc, a, a_s, wq, ws, A_FMT, DOT_SCALED, BLOCK_N, BLOCK_K, DOT_DTYPE)

    weight = tl.load(topk_w_ptr + rows, mask=row_ok, other=0.0)
    acc = acc * weight[:, None]
    tl.store(
        out_ptr + slot[:, None] * stride_out + offs_n[None, :],
        round_bf16_rne(acc, MANUAL_BF16_RNE).to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & n_ok[None, :],
    )
