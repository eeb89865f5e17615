"""Triton body of the DSA lightning indexer's scoring: score[b, t] = k_scale[t] * sum_h w[b, h] *
relu(q[b, h] . k[t]) over a paged FP8 key cache. Callers use
`sgl_kernel_rocm.attention.dsa_indexer` (the wrapper); the float64 reference is
`reference.dsa_indexer_scores_ref`.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _indexer_score_kernel(
    Q,
    W,
    K,
    KS,
    BT,
    SEQ,
    OUT,
    num_heads,
    tiles_per_prog,
    stride_qb,
    stride_qh,
    stride_wb,
    stride_kp,
    stride_kt,
    stride_ksp,
    stride_kst,
    stride_btb,
    stride_ob,
    PAGE: tl.constexpr,
    D: tl.constexpr,
    BLOCK_HI: tl.constexpr,
    BLOCK_N: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # One program scores `tiles_per_prog` consecutive BLOCK_N-key tiles of one request: the
    # query heads, head weights and row pointers are loaded once and the loop streams keys.
    b = tl.program_id(0)
    chunk = tl.program_id(1)
    seq_len = tl.load(SEQ + b).to(tl.int32)
    offs_h = tl.arange(0, BLOCK_HI)
    offs_d = tl.arange(0, D)
    h_mask = offs_h < num_heads
    q = tl.load(
        Q + b.to(tl.int64) * stride_qb + offs_h[:, None] * stride_qh + offs_d[None, :],
        mask=h_mask[:, None],
        other=0.0,
    )
    if UPCAST:
        # The interpreter's bf16 tl.dot is wrong (triton #11584): do the math in fp32.
        q = q.to(tl.float32)
    w = tl.load(W + b.to(tl.int64) * stride_wb + offs_h, mask=h_mask, other=0.0).to(tl.float32)
    bt_row = BT + b.to(tl.int64) * stride_btb
    out_row = OUT + b.to(tl.int64) * stride_ob
    n_start = chunk * tiles_per_prog * BLOCK_N
    for n0 in range(n_start, n_start + tiles_per_prog * BLOCK_N, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        in_row = offs_n < stride_ob  # the score row is never wider than the block table
        n_mask = (offs_n < seq_len) & in_row
        if PAGE % BLOCK_N == 0:
            # The tile lies in one page: one page-id load, then its keys and scales are
            # contiguous runs (no per-key block-table gather).
            live = n0 < tl.minimum(seq_len, stride_ob)
            page = tl.load(bt_row + n0 // PAGE, mask=live, other=0).to(tl.int64)
        else:
            page = tl.load(bt_row + offs_n // PAGE, mask=n_mask, other=0).to(tl.int64)
        slot = offs_n % PAGE
        k = tl.load(  # stream: kv
            K + (page * stride_kp + slot * stride_kt)[:, None] + offs_d[None, :],
            mask=n_mask[:, None],
            other=0.0,
        )
        k_scale = tl.load(KS + page * stride_ksp + slot * stride_kst, mask=n_mask, other=0.0)
        s = tl.dot(q, tl.trans(k.to(q.dtype)))
        score = tl.sum(tl.maximum(s, 0.0) * w[:, None], 0) * k_scale
        score = tl.where(n_mask, score, float("-inf"))
        tl.store(out_row + offs_n, score, mask=in_row)
