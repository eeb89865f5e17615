"""Out-of-tree SGLang platforms `mx_cpu` and `mx_cuda`, registered under the
`sglang.srt.platforms` entry-point group (one `activate` each).

`mx_cpu`: SGLang 0.5.23 on a plain CPU box (no GPU, no AMX needed). `mx_cuda`: SGLang on a CUDA
GPU without `sgl_kernel` (native torch custom ops, our attention backends and MoE). Which one
claims a process, if any, is one rule (`platform_choice.choose`), so at most one activates and
SGLang never sees two; on a real GPU image (sgl_kernel installed) neither does, and only our
general plugin (`sglang_mx.seam.plugin`) is active.
"""

from __future__ import annotations

from sglang_mx.platform_choice import MX_CPU, MX_CUDA, current_choice

PLATFORM_CLASS = "sglang_mx.seam.platform_impl.MxCpuPlatform"
CUDA_PLATFORM_CLASS = "sglang_mx.seam.platform_cuda.MxCudaPlatform"


def activate() -> str | None:
    if current_choice() == MX_CPU:
        return PLATFORM_CLASS
    return None


def activate_cuda() -> str | None:
    if current_choice() == MX_CUDA:
        return CUDA_PLATFORM_CLASS
    return None
