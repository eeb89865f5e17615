"""Triton body of paged GQA decode attention (one query token per request), split-KV. Callers
use `sgl_kernel_rocm.attention.gqa_decode` (the wrapper); the float64 reference is
`reference.gqa_decode_ref`.

One program serves all query heads of a KV head (GQA packing), so K/V are read once per group;
it writes its split's partial output and lse (split_kv.py), merged by reduce.py.
"""

from __future__ import annotations

import triton
import triton.language as tl

from sgl_kernel_rocm.attention import split_kv


@triton.jit
def _gqa_decode_split_kernel(
    Q,
    K,
    V,
    BT,
    SEQ,
    KS,
    VS,
    O_PART,
    LSE_PART,
    qk_scale_log2,
    seq_cap,
    window,
    num_splits,
    stride_qb,
    stride_qh,
    stride_kp,
    stride_kt,
    stride_kh,
    stride_vp,
    stride_vt,
    stride_vh,
    stride_btb,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
    GROUP: tl.constexpr,
    PAGE: tl.constexpr,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_N: tl.constexpr,
    UPCAST: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = split_kv.clamped_seq_len(SEQ, b, seq_cap)
    start = tl.where(window >= 0, tl.maximum(seq_len - 1 - window, 0), 0)
    lo, hi = split_kv.split_range(start, seq_len, split, num_splits)

    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    h_mask = offs_h < GROUP
    d_mask = offs_d < D
    dv_mask = offs_dv < DV
    heads = kvh * GROUP + offs_h
    q = tl.load(
        Q + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
        mask=h_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    # Per-head K dequant scale folds into the score scale; V's into the output.
    score_scale = qk_scale_log2 * tl.load(KS + kvh)
    v_scale = tl.load(VS + kvh)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_DV], tl.float32)
    bt_row = BT + b.to(tl.int64) * stride_btb
    for n0 in range(lo, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_mask = offs_n < hi
        page = tl.load(bt_row + offs_n // PAGE, mask=n_mask, other=0).to(tl.int64)
        slot = offs_n % PAGE
        k = tl.load(  # stream: kv
            K + (page * stride_kp + slot * stride_kt + kvh * stride_kh)[:, None] + offs_d[None, :],
            mask=n_mask[:, None] & d_mask[None, :],
            other=0.0,
        )
        v = tl.load(  # stream: kv
            V + (page * stride_vp + slot * stride_vt + kvh * stride_vh)[:, None] + offs_dv[None, :],
            mask=n_mask[:, None] & dv_mask[None, :],
            other=0.0,
        )
        if UPCAST:
            # The interpreter's bf16 tl.dot is wrong (triton #11584): do the math in fp32.
            qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        else:
            qk = tl.dot(q, tl.trans(k.to(q.dtype)))
        qk = tl.where(n_mask[None, :], qk * score_scale, float("-inf"))
        p, alpha, m_i, l_i = split_kv.online_softmax(qk, m_i, l_i)
        if UPCAST:
            pv = tl.dot(p, v.to(tl.float32))
        else:
            pv = tl.dot(p.to(q.dtype), v.to(q.dtype))
        acc = acc * alpha[:, None] + pv

    split_kv.store_partial(O_PART, LSE_PART, acc, m_i, l_i, v_scale, b, heads, split, offs_dv,
                           h_mask, dv_mask, stride_ob, stride_oh, stride_os, stride_lb,
                           stride_lh)  # fmt: skip
