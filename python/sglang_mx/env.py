"""Every environment variable sglang_mx reads, in one typed place."""

from __future__ import annotations

import os
from dataclasses import dataclass


def _flag(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class _Env:
    """Read on each call so tests and child processes see the current environment."""

    @property
    def disabled(self) -> bool:
        """SGLANG_MX_DISABLE=1: load nothing (plain SGLang)."""
        return _flag("SGLANG_MX_DISABLE")

    @property
    def force_cpu(self) -> bool:
        """SGLANG_MX_FORCE_CPU=1: use the CPU platform even when a GPU is visible."""
        return _flag("SGLANG_MX_FORCE_CPU")

    @property
    def busy_poll(self) -> bool:
        """SGLANG_MX_BUSY_POLL=1: keep SGLang's scheduler spinning while idle on the CPU platform
        (by default it sleeps on its sockets, `--sleep-on-idle`)."""
        return _flag("SGLANG_MX_BUSY_POLL")

    @property
    def guards(self) -> bool:
        """SGLANG_MX_GUARDS=0: skip the request guards (to measure them, or to show what they
        prevent); on by default."""
        return _flag("SGLANG_MX_GUARDS", default=True)

    @property
    def moe_backend(self) -> str:
        """SGLANG_MX_MOE_BACKEND=auto|torch|triton|sglang: which MXFP4 MoE expert path to run
        ("sglang" leaves SGLang's own MXFP4 MoE in place on GPU nodes)."""
        value = os.environ.get("SGLANG_MX_MOE_BACKEND", "auto").strip().lower()
        if value not in ("auto", "torch", "triton", "sglang"):
            raise ValueError(
                f"SGLANG_MX_MOE_BACKEND must be auto, torch, triton or sglang, got {value!r}"
            )
        return value

    @property
    def malloc(self) -> str:
        """SGLANG_MX_MALLOC=auto|jemalloc|glibc: the allocator `sglang-mx serve` gives a CPU
        server (seam/cpu_malloc.py): "auto" jemalloc where libjemalloc.so.2 is installed, else
        glibc with a fixed mmap threshold; "glibc" leaves glibc's malloc as it is."""
        value = os.environ.get("SGLANG_MX_MALLOC", "auto").strip().lower() or "auto"
        if value not in ("auto", "jemalloc", "glibc"):
            raise ValueError(f"SGLANG_MX_MALLOC must be auto, jemalloc or glibc, got {value!r}")
        return value

    @property
    def mx_platform(self) -> str:
        """SGLANG_MX_PLATFORM=auto|cuda-native: "cuda-native" runs SGLang on a CUDA GPU through
        our `mx_cuda` platform (native torch ops + our kernels, no sgl_kernel) even where the
        real sgl_kernel is installed; "auto" picks it only where sgl_kernel is missing."""
        value = os.environ.get("SGLANG_MX_PLATFORM", "auto").strip().lower() or "auto"
        if value not in ("auto", "cuda-native"):
            raise ValueError(f"SGLANG_MX_PLATFORM must be auto or cuda-native, got {value!r}")
        return value

    @property
    def self_check(self) -> str:
        """SGLANG_MX_SELF_CHECK=auto|1|0: run each of our kernels once at model load, at the
        model's shapes, against its torch reference, and decline the takeover of an op whose
        kernel fails ("auto": in processes that serve on a GPU; "1": also on a CPU, through the
        Triton interpreter; "0": never, our kernels serve unchecked)."""
        raw = os.environ.get("SGLANG_MX_SELF_CHECK", "auto").strip().lower() or "auto"
        value = {"1": "on", "true": "on", "on": "on", "0": "off", "false": "off", "off": "off"}
        if raw != "auto" and raw not in value:
            raise ValueError(f"SGLANG_MX_SELF_CHECK must be auto, 1 or 0, got {raw!r}")
        return value.get(raw, "auto")

    @property
    def self_check_dir(self) -> str:
        """SGLANG_MX_SELF_CHECK_DIR: where each serving process writes its self-check record
        (one JSON file per process), which `sglang-mx info` reads."""
        default = os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
            "sglang_mx",
            "self-check",
        )
        return os.environ.get("SGLANG_MX_SELF_CHECK_DIR") or default

    def gpu_visible(self) -> bool:
        import torch

        return bool(torch.cuda.is_available())

    def platform_wanted(self) -> bool:
        """The `mx_cpu` platform claims this process (no GPU, or SGLANG_MX_FORCE_CPU=1)."""
        return not self.disabled and (self.force_cpu or not self.gpu_visible())


ENV = _Env()
