"""Orthonormal Walsh-Hadamard rotation (what SGLang's DSA indexer applies to q and k before FP8).

H / sqrt(n) is orthogonal, so q.k is unchanged in exact arithmetic; the rotation spreads outliers
across the 128 dims so one FP8 scale per key fits them better. SGLang's CPU build has no
`hadamard_transform` kernel; this is the same map as a matmul.
"""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=8)
def _matrix(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    if n & (n - 1):
        raise ValueError(f"Hadamard size must be a power of two, got {n}")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h * n**-0.5).to(dtype=dtype, device=device)


def rotate(x: torch.Tensor) -> torch.Tensor:
    """x @ (H_n / sqrt(n)) over the last dim, in x's dtype (fp32 math for half inputs)."""
    work = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    h = _matrix(x.shape[-1], work, str(x.device))
    return (x.to(work) @ h).to(x.dtype)
