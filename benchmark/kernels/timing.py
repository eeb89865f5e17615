"""Timing and device-ceiling measurements shared by the kernel microbenchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_fn(fn: Callable[[], Any], device: str, iters: int) -> float:
    """Median seconds per call (one warm-up call first)."""
    fn()
    sync(device)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def copy_bandwidth(device: str, nbytes: int, iters: int) -> float:
    """Measured device-to-device copy GB/s (read + write counted)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    return 2 * nbytes / time_fn(lambda: dst.copy_(src), device, iters) / 1e9


def matrix_rate(device: str, n: int, iters: int) -> float:
    """Measured dense matmul TFLOP/s (bf16 on GPU, fp32 on CPU)."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n**3 / time_fn(lambda: a @ b, device, iters) / 1e12
