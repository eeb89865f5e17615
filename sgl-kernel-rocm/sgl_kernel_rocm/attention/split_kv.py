"""Split-KV (flash-decoding) plumbing that GQA, MLA and DSA decode share, on both sides:

- kernel side: `clamped_seq_len` and `split_range` (a split's share of the keys),
  `online_softmax` (one tile's step of the running max / sum, exp2 units) and `store_partial`
  (the epilogue: a split's normalized output and its log2 lse);
- host side: `SplitKV` (the partial buffers, the strides the kernel takes, the merge into
  `out`). `out` may be any view: with one split the kernel writes into it in place, with more
  the merge does; only a view whose last dim is strided goes through a contiguous stand-in.

No host syncs here either: everything is sized from shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from sgl_kernel_rocm.attention._common import LN2
from sgl_kernel_rocm.attention.reduce import merge_splits


@triton.jit
def clamped_seq_len(SEQ, b, seq_cap):
    """Request b's length, at most seq_cap (what its block-table row addresses): a bad length
    cannot make the kernel read past the row."""
    return tl.minimum(tl.load(SEQ + b).to(tl.int32), seq_cap)


@triton.jit
def split_range(start, end, split, num_splits):
    """[lo, hi) of this split's share of the items [start, end) (empty for a split past them)."""
    per_split = tl.cdiv(end - start, num_splits)
    lo = start + split * per_split
    return lo, tl.minimum(lo + per_split, end)


@triton.jit
def split_range_aligned(end, split, num_splits, ALIGN: tl.constexpr):
    """split_range over [0, end) with every split starting on a multiple of ALIGN (a tile then
    never straddles two pages when the page size is a multiple of it)."""
    per_split = tl.cdiv(tl.cdiv(end, num_splits), ALIGN) * ALIGN
    lo = split * per_split
    return lo, tl.minimum(lo + per_split, end)


@triton.jit
def online_softmax(qk, m_i, l_i, KEY_AXIS: tl.constexpr = 1):
    """One tile of the online softmax over scores qk [H, N] (KEY_AXIS 1), or [N, H] with keys
    on the MMA's M side (KEY_AXIS 0); log2 units, -inf = masked. Returns (p, alpha, m_new,
    l_new): the caller rescales its accumulator by alpha, adds p @ v."""
    m_new = tl.maximum(m_i, tl.max(qk, KEY_AXIS))
    # A tile can be fully masked (a sparse list's -1 run): keep exp2 away from (-inf) - (-inf).
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(qk - tl.expand_dims(m_safe, KEY_AXIS))
    return p, alpha, m_new, l_i * alpha + tl.sum(p, KEY_AXIS)


@triton.jit
def store_partial(
    O_PART,
    LSE_PART,
    acc,
    m_i,
    l_i,
    out_scale,
    b,
    heads,
    split,
    offs_dv,
    h_mask,
    dv_mask,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
):
    """A split's output acc * out_scale / l (zeros and lse = -inf where it saw no key)."""
    has = l_i > 0
    out = acc * (out_scale / tl.where(has, l_i, 1.0))[:, None]
    o_ptrs = (
        O_PART
        + b.to(tl.int64) * stride_ob
        + heads[:, None] * stride_oh
        + split * stride_os
        + offs_dv[None, :]
    )
    tl.store(o_ptrs, out, mask=h_mask[:, None] & dv_mask[None, :])
    lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
    tl.store(LSE_PART + b.to(tl.int64) * stride_lb + heads * stride_lh + split, lse, mask=h_mask)


@dataclass(frozen=True)
class SplitKV:
    """Where a decode launch writes: `o_part` [B, H, S, Dv] and `lse_part` [B, H, S] (log2).

    With one split `o_part` is `dst` itself (the kernel stores the final rows, in out's dtype);
    with more it is an fp32 buffer that `finish` merges into `dst`. `dst` is `out` unless out's
    last dim is strided (then a contiguous stand-in, copied into `out` at the end).
    """

    out: torch.Tensor
    dst: torch.Tensor
    o_part: torch.Tensor
    lse_part: torch.Tensor

    @classmethod
    def plan(
        cls, q: torch.Tensor, out: torch.Tensor | None, heads: int, dv: int, splits: int
    ) -> SplitKV:
        batch = q.shape[0]
        if out is None:
            out = torch.empty(batch, heads, dv, dtype=q.dtype, device=q.device)
        elif tuple(out.shape) != (batch, heads, dv):
            raise ValueError(f"out is {tuple(out.shape)}, expected {(batch, heads, dv)}")
        dst = out if out.stride(-1) == 1 else out.new_empty(out.shape)
        if splits == 1:
            o_part = dst.unsqueeze(2)
        else:
            o_part = torch.empty(batch, heads, splits, dv, dtype=torch.float32, device=q.device)
        lse_part = torch.empty(batch, heads, splits, dtype=torch.float32, device=q.device)
        return cls(out, dst, o_part, lse_part)

    @property
    def splits(self) -> int:
        return self.lse_part.shape[2]

    def strides(self) -> tuple[int, int, int, int, int]:
        """stride_ob, stride_oh, stride_os, stride_lb, stride_lh: the kernels' last strides."""
        o, lse = self.o_part, self.lse_part
        return o.stride(0), o.stride(1), o.stride(2), lse.stride(0), lse.stride(1)

    def finish(self, return_lse: bool) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Merge the splits into `out` (after the launch); with return_lse also the natural-log
        lse [B, H] (fp32)."""
        lse = self.lse_part[..., 0]
        if self.splits > 1 and self.out.shape[0]:
            shape, dev = self.lse_part.shape[:2], self.lse_part.device
            lse = torch.empty(shape, dtype=torch.float32, device=dev) if return_lse else None
            merge_splits(self.o_part, self.lse_part, self.dst, lse)
        if self.dst is not self.out:
            self.out.copy_(self.dst)
        return (self.out, lse * LN2) if return_lse else self.out
