"""Split-KV (flash-decoding) reduce: merge per-split partial outputs by their log-sum-exp.

Partials are normalized per split; lse is in log2 units (the kernels use exp2). The split count
is a runtime argument; BLOCK_S (its power-of-two bucket, <= MAX_SPLITS) is the only constexpr,
so a new split count compiles at most once per bucket. A split that saw
no token carries lse = -inf and contributes nothing; a row with no token at all becomes zeros.

The public wrapper; the Triton body is _reduce_kernels.py, the float64 reference
`merge_splits_ref` is in reference.py.
"""

from __future__ import annotations

import torch

from sgl_kernel_rocm.attention._common import MAX_SPLITS, next_pow2
from sgl_kernel_rocm.attention._reduce_kernels import _merge_splits_kernel


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
