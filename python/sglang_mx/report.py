"""What this machine runs: versions, plugin discovery, platform and per-op kernel paths.
Shared by `sglang-mx info` and the benchmark stamps."""

from __future__ import annotations

import importlib.metadata as md
import platform
from typing import Any

from sglang_mx.env import ENV

_PACKAGES = (
    "sglang-mx",
    "sgl-kernel-rocm",
    "sglang",
    "torch",
    "triton",
    "transformers",
    "sglang-router",
)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def plugin_status() -> dict[str, str]:
    out = {}
    for group in ("sglang.srt.plugins", "sglang.srt.platforms"):
        eps = [ep for ep in md.entry_points(group=group) if ep.value.startswith("sglang_mx")]
        out[group] = ", ".join(f"{ep.name} -> {ep.value}" for ep in eps) or "NOT registered"
    out["disabled (SGLANG_MX_DISABLE)"] = str(ENV.disabled)
    out["platform SGLang will use"] = (
        "mx_cpu (sglang_mx.platform_impl.MxCpuPlatform)"
        if ENV.platform_wanted()
        else "SGLang in-tree GPU platform + sglang_mx general plugin"
    )
    return out


def _platform_choices() -> tuple[str, str]:
    """(fused-op dispatch key, default attention backend) of the platform SGLang resolves here
    (`current_platform`: ours on a CPU box, SGLang's in-tree one on a GPU node)."""
    from sglang.srt.platforms import current_platform

    if current_platform.is_out_of_tree():
        key = current_platform.get_dispatch_key_name()
        attention = current_platform.get_default_attention_backend()
        return key, attention
    import torch

    return ("hip" if torch.version.hip else "cuda"), "SGLang's default for this GPU"


MOE_ROW = "MXFP4 MoE experts (quant_method mxfp4/quark)"


def kernel_paths() -> dict[str, str]:
    """Per op, what this machine runs: each line comes from the code that dispatches it."""
    from sgl_kernel_rocm.arch import current_arch

    from sglang_mx.moe_dispatch import describe_moe

    cpu = ENV.platform_wanted()
    arch = "cpu" if cpu else current_arch()
    key, attention = _platform_choices()
    interp = " (Triton interpreter)" if cpu else ""
    return {
        "arch": arch,
        MOE_ROW: describe_moe("cpu" if cpu else "cuda", arch),
        "MoE router (sigmoid + bias top-k)": f"SGLang TopK.forward_{key}",
        "attention default": attention,
        "attention --attention-backend mx_triton": (
            f"sgl_kernel_rocm GQA paged decode{interp}; prefill delegated"
        ),
    }


def collect_info() -> dict[str, Any]:
    return {"versions": versions(), "plugin": plugin_status(), "kernels": kernel_paths()}
