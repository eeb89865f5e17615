"""Timing for the GPU check: copy bandwidth, kernel-only times (CUDA graphs), per-kernel split.

On the CPU dry run every function falls back to one wall-clock call (interpreter numbers mean
nothing; they only prove the code runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch


def on_gpu() -> bool:
    return torch.cuda.is_available()


def _event_times(fn: Callable[[], Any], reps: int) -> list[float]:
    """Seconds of each of `reps` calls of `fn` (CUDA events, after 3 warm-up calls), sorted."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return sorted(times)


def copy_gbps(nbytes: int = 1 << 30, reps: int = 20) -> dict[str, float]:
    """Device-to-device copy, read + write counted, best and median of `reps` (CUDA events)."""
    if not on_gpu():
        return {"best_gbps": 0.0, "median_gbps": 0.0, "bytes_each_way": 0}
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    times = _event_times(lambda: dst.copy_(src), reps)
    src = dst = None  # freed before empty_cache
    torch.cuda.empty_cache()
    return {
        "bytes_each_way": nbytes,
        "best_gbps": 2 * nbytes / times[0] / 1e9,
        "median_gbps": 2 * nbytes / times[len(times) // 2] / 1e9,
    }


def mma_tflops(n: int = 8192, reps: int = 10) -> dict[str, float]:
    """Dense bf16 matmul n x n x n (torch, i.e. cuBLAS / hipBLASLt), best and median TFLOP/s:
    the compute roof the roofline fractions use (a measured roof, not a datasheet's)."""
    if not on_gpu():
        return {"best_tflops": 0.0, "median_tflops": 0.0, "n": 0}
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    times = _event_times(lambda: a @ b, reps)
    a = b = None
    torch.cuda.empty_cache()
    flop = 2 * n**3
    return {"n": n, "best_tflops": flop / times[0] / 1e12,
            "median_tflops": flop / times[len(times) // 2] / 1e12}  # fmt: skip


def kernel_time_s(fn: Callable[[], Any], rep_ms: int = 20) -> tuple[float, str]:
    """Median seconds per call of `fn` replayed from a CUDA graph (no launch overhead), via
    triton.testing.do_bench_cudagraph; if capture fails, do_bench (says which in the 2nd item)."""
    import triton.testing as tt

    if not on_gpu():
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0, "cpu-wall"
    fn()  # compile outside the capture
    torch.cuda.synchronize()
    try:
        return tt.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median") / 1e3, "cudagraph"
    except Exception as exc:  # noqa: BLE001 - fall back, and say so in the row
        torch.cuda.synchronize()
        ms = tt.do_bench(fn, warmup=5, rep=rep_ms, return_mode="median")
        return ms / 1e3, f"do_bench (graph capture failed: {type(exc).__name__})"


def kernel_split_s(fn: Callable[[], Any], iters: int = 10) -> dict[str, float]:
    """Device seconds per call by kernel, from the profiler over `iters` eager calls, grouped
    as 'gate_up' / 'down' / 'other' by the kernel's name (Triton names a kernel after its
    @triton.jit function)."""
    if not on_gpu():
        return {}
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    out: dict[str, float] = {"gate_up": 0.0, "down": 0.0, "other": 0.0}
    names: dict[str, float] = {}
    for evt in prof.key_averages():
        us = getattr(evt, "device_time_total", None)
        if us is None:
            us = getattr(evt, "cuda_time_total", 0.0)
        if not us:
            continue
        name = evt.key
        group = "gate_up" if "gate_up" in name else "down" if "down" in name else "other"
        out[group] += us / 1e6 / iters
        names[name[:60]] = names.get(name[:60], 0.0) + us / 1e6 / iters
    out["kernels"] = names  # type: ignore[assignment]
    return out
