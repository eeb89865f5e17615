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


def merge_splits(
    o_part: torch.Tensor,
    lse_part: torch.Tensor,
    out: torch.Tensor,
    lse_out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Merge o_part [..., S, DV] (fp32) with lse_part [..., S] (log2) into out [..., DV]; the
    leading dims are [rows] or [batch, heads], and any of the four may be a strided view whose
    last dim is contiguous (e.g. `out` rows inside a wider buffer)."""
    *lead, splits, dv = o_part.shape
    if len(lead) not in (1, 2) or tuple(lse_part.shape) != (*lead, splits):
        raise ValueError(f"o_part {tuple(o_part.shape)} / lse_part {tuple(lse_part.shape)}")
    if o_part.stride(-1) != 1 or lse_part.stride(-1) != 1 or out.stride(-1) != 1:
        raise ValueError("o_part, lse_part and out need a contiguous last dim")
    if splits > MAX_SPLITS:
        raise ValueError(f"{splits} splits > MAX_SPLITS={MAX_SPLITS}")
    result = out
    if len(lead) == 1:  # [rows, ...] is [rows, 1 head, ...]
        o_part, lse_part, out = o_part[:, None], lse_part[:, None], out[:, None]
        lse_out = lse_out[:, None] if lse_out is not None else None
    lse_x = lse_out if lse_out is not None else lse_part[..., 0]
    _merge_splits_kernel[(o_part.shape[0], o_part.shape[1])](
        o_part,
        lse_part,
        out,
        lse_x,
        *o_part.stride()[:3],
        *lse_part.stride()[:2],
        *out.stride()[:2],
        *lse_x.stride()[:2],
        splits,
        DV=dv,
        BLOCK_S=max(2, next_pow2(splits)),
        BLOCK_DV=next_pow2(dv),
        WRITE_LSE=lse_out is not None,
    )
    return result


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
