"""Which of our SGLang platforms claims a process: `mx_cpu`, `mx_cuda` or none (SGLang's own).

One pure function of the facts (`choose`), so the rule is tested without a GPU, and one reader of
this process's facts (`current_choice`). The rule:

- SGLANG_MX_DISABLE=1: none (plain SGLang).
- no GPU, or SGLANG_MX_FORCE_CPU=1: `mx_cpu`.
- a ROCm GPU: none; SGLang's ROCm platform (our plugin still registers backends and the MoE).
- a CUDA GPU with SGLANG_MX_PLATFORM=cuda-native: `mx_cuda`.
- a CUDA GPU whose Python has no real `sgl_kernel` (our stand-in does not count): `mx_cuda`,
  since SGLang's in-tree CUDA platform calls sgl_kernel from its custom ops.
- a CUDA GPU with the real `sgl_kernel`: none; nothing changes on a real SGLang GPU image.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from sglang_mx.env import ENV

MX_CPU = "mx_cpu"
MX_CUDA = "mx_cuda"


@dataclass(frozen=True)
class Facts:
    disabled: bool
    force_cpu: bool
    gpu: bool  # torch.cuda.is_available()
    hip: bool  # torch.version.hip is set (a ROCm torch)
    sgl_kernel: bool  # the real sgl_kernel package can be found
    wanted: str  # SGLANG_MX_PLATFORM: "auto" or "cuda-native"


def choose(f: Facts) -> str | None:
    """The platform name for these facts, or None for SGLang's in-tree platform."""
    if f.disabled:
        return None
    if f.force_cpu or not f.gpu:
        return MX_CPU
    if f.hip:
        return None
    if f.wanted == "cuda-native" or not f.sgl_kernel:
        return MX_CUDA
    return None


def current_facts() -> Facts:
    import torch

    gpu = bool(torch.cuda.is_available())
    return Facts(
        disabled=ENV.disabled,
        force_cpu=ENV.force_cpu,
        gpu=gpu,
        hip=torch.version.hip is not None,
        sgl_kernel=gpu and real_package_available("sgl_kernel"),
        wanted=ENV.mx_platform,
    )


def current_choice() -> str | None:
    return choose(current_facts())


def real_package_available(name: str) -> bool:
    """`name` is importable and is not one of our stand-ins (sglang_mx/_cpu_shims)."""
    spec = importlib.util.find_spec(name)
    # Any checkout's stand-in (the venv's .pth may point at another one) is not the real package.
    return spec is not None and f"{os.sep}_cpu_shims{os.sep}" not in str(spec.origin or "")


def cuda_native_wanted() -> bool:
    """The `mx_cuda` platform claims this process."""
    return current_choice() == MX_CUDA


def serves_every_layer() -> bool:
    """One of our platforms serves this process, so our quantization config serves every MXFP4
    layer (linears too), not only SGLang's routed experts."""
    return ENV.platform_wanted() or cuda_native_wanted()
