"""Radix select of the DSA indexer's top-k on the device, one program per request (an option
beside torch.topk, timed apart by the GPU check as `indexer_topk_radix`).

The public wrapper and its launch settings; the Triton body (and the algorithm) is
_topk_radix_kernels.py. No host sync: the row length is a shape, the valid length a device
value read by the kernel.
"""

from __future__ import annotations

import torch

from sgl_kernel_rocm.attention._common import interpreting
from sgl_kernel_rocm.attention._topk_radix_kernels import _radix_topk_kernel

BLOCK = 1024  # scores per chunk of a pass
NUM_WARPS = 8


def select_topk_radix(scores: torch.Tensor, seq_lens: torch.Tensor, k: int) -> torch.Tensor:
    """select_topk's contract by radix select: top-k positions per row of fp32 scores [B, L]
    (-inf = padding) -> int32 [B, k], -1 where a row has fewer than k finite scores; positions
    in ascending order among those above the k-th score, then those equal to it."""
    if scores.dim() != 2 or scores.dtype != torch.float32 or scores.stride(-1) != 1:
        raise ValueError("scores must be a [batch, length] fp32 tensor with a contiguous last dim")
    if seq_lens.shape != (scores.shape[0],):
        raise ValueError(f"seq_lens must be [{scores.shape[0]}], got {tuple(seq_lens.shape)}")
    if k < 1:
        raise ValueError(f"top_k must be >= 1, got {k}")
    batch, length = scores.shape
    idx = torch.empty(batch, k, dtype=torch.int32, device=scores.device)
    if batch:
        block = 64 if interpreting() else BLOCK
        _radix_topk_kernel[(batch,)](
            scores, seq_lens, idx, length, k, scores.stride(0), idx.stride(0), BLOCK=block,
            num_warps=NUM_WARPS,
        )  # fmt: skip
    return idx
