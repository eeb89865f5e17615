"""Split-KV (flash-decoding) reduce: merge per-split partial outputs by their log-sum-exp.

Partials are normalized per split; lse is in log2 units (the kernels use exp2). The split count
is a runtime argument; BLOCK_S (its power-of-two bucket, <= MAX_SPLITS) is the only constexpr,
so a new split count compiles at most once per bucket. A split that saw
no token carries lse = -inf and contributes nothing; a row with no token at all becomes zeros.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from sgl_kernel_rocm.attention._common import MAX_SPLITS, next_pow2


@triton.jit
def _merge_splits_kernel(
    O_PART,
    LSE_PART,
    OUT,
    LSE_OUT,
    stride_pr,
    stride_ps,
    stride_lr,
    stride_or,
    num_splits,
    DV: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    WRITE_LSE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_DV)
    s_mask = offs_s < num_splits
    d_mask = offs_d < DV
    lse = tl.load(LSE_PART + row * stride_lr + offs_s, mask=s_mask, other=float("-inf"))
    m = tl.max(lse, 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(lse - m_safe)
    w = tl.where(s_mask, w, 0.0)
    denom = tl.sum(w, 0)
    part = tl.load(
        O_PART + row * stride_pr + offs_s[:, None] * stride_ps + offs_d[None, :],
        mask=s_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    acc = tl.sum(part * w[:, None], 0)
    out = acc / tl.where(denom > 0, denom, 1.0)
    tl.store(OUT + row * stride_or + offs_d, out, mask=d_mask)
    if WRITE_LSE:
        safe = tl.where(denom > 0, denom, 1.0)
        tl.store(LSE_OUT + row, tl.where(denom > 0, m_safe + tl.log2(safe), float("-inf")))


def merge_splits(
    o_part: torch.Tensor,
    lse_part: torch.Tensor,
    out: torch.Tensor,
    lse_out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Merge o_part [rows, S, DV] (fp32) with lse_part [rows, S] (log2) into out [rows, DV]."""
    rows, splits, dv = o_part.shape
    assert o_part.stride(2) == 1 and lse_part.stride(1) == 1 and out.stride(1) == 1
    if splits > MAX_SPLITS:
        raise ValueError(f"{splits} splits > MAX_SPLITS={MAX_SPLITS}")
    _merge_splits_kernel[(rows,)](
        o_part,
        lse_part,
        out,
        lse_out if lse_out is not None else lse_part,
        o_part.stride(0),
        o_part.stride(1),
        lse_part.stride(0),
        out.stride(0),
        splits,
        DV=dv,
        BLOCK_S=max(2, next_pow2(splits)),
        BLOCK_DV=next_pow2(dv),
        WRITE_LSE=lse_out is not None,
    )
    return out


# ----------------------------------------------------------------------------- reference


def merge_splits_ref(o_part: torch.Tensor, lse_part: torch.Tensor) -> torch.Tensor:
    """Torch reference of merge_splits in float64."""
    lse = lse_part.double()
    m = lse.amax(dim=1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w = torch.exp2(lse - m)
    denom = w.sum(dim=1, keepdim=True)
    out = (o_part.double() * w[..., None]).sum(dim=1) / torch.where(denom > 0, denom, 1.0)
    return out
