"""Out-of-tree SGLang platform `mx_cpu`: SGLang 0.5.23 on a plain CPU box (no GPU, no AMX needed).

Registered under the `sglang.srt.platforms` entry-point group. `activate()` only claims the
process when no GPU is visible (or SGLANG_MX_FORCE_CPU=1), so on a GPU node SGLang keeps its
in-tree CUDA/ROCm platform and only our general plugin (`sglang_mx.seam.plugin`) is active.
"""

from __future__ import annotations

from sglang_mx.env import ENV

PLATFORM_CLASS = "sglang_mx.seam.platform_impl.MxCpuPlatform"


def activate() -> str | None:
    if ENV.platform_wanted():
        return PLATFORM_CLASS
    return None
