"""Triton body of the split-KV (flash-decoding) reduce. Callers use
`sgl_kernel_rocm.attention.reduce.merge_splits` (the wrapper); the float64 reference is
`reference.merge_splits_ref`.

Partials are normalized per split; lse is in log2 units (the kernels use exp2). The split count
is a runtime argument; BLOCK_S (its power-of-two bucket, <= MAX_SPLITS) is the only constexpr,
so a new split count compiles at most once per bucket. A split that saw
no token carries lse = -inf and contributes nothing; a row with no token at all becomes zeros.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _merge_splits_kernel(
    O_PART,
    LSE_PART,
    OUT,
    LSE_OUT,
    stride_pb,
    stride_ph,
    stride_ps,
    stride_lb,
    stride_lh,
    stride_ob,
    stride_oh,
    stride_xb,
    stride_xh,
    num_splits,
    DV: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    WRITE_LSE: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_DV)
    s_mask = offs_s < num_splits
    d_mask = offs_d < DV
    lse = tl.load(
        LSE_PART + b * stride_lb + h * stride_lh + offs_s, mask=s_mask, other=float("-inf")
    )
    m = tl.max(lse, 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(lse - m_safe)
    w = tl.where(s_mask, w, 0.0)
    denom = tl.sum(w, 0)
    part = tl.load(
        O_PART + b * stride_pb + h * stride_ph + offs_s[:, None] * stride_ps + offs_d[None, :],
        mask=s_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    acc = tl.sum(part * w[:, None], 0)
    out = acc / tl.where(denom > 0, denom, 1.0)
    tl.store(OUT + b * stride_ob + h * stride_oh + offs_d, out, mask=d_mask)
    if WRITE_LSE:
        safe = tl.where(denom > 0, denom, 1.0)
        lse_out = tl.where(denom > 0, m_safe + tl.log2(safe), float("-inf"))
        tl.store(LSE_OUT + b * stride_xb + h * stride_xh, lse_out)
