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


def kernel_paths() -> dict[str, str]:
    import os

    from sgl_kernel_rocm.arch import current_arch, has_native_dot_scaled

    arch = current_arch()
    interp = os.environ.get("TRITON_INTERPRET") == "1" or arch == "cpu"
    moe_backend = ENV.moe_backend
    if moe_backend == "torch" or (moe_backend == "auto" and arch == "cpu"):
        moe = "torch reference (sgl_kernel_rocm.moe.reference, vectorized per expert)"
    else:
        path = "tl.dot_scaled" if has_native_dot_scaled(arch) else "nibble unpack + scale"
        moe = f"Triton fused MoE, {path}" + (" (interpreter)" if interp else "")
    attn_default = "torch_native" if ENV.platform_wanted() else "SGLang default for the GPU"
    return {
        "arch": arch,
        "MXFP4 MoE experts (quant_method mxfp4/quark)": moe,
        "MoE router (sigmoid + bias top-k)": "SGLang TopK (forward_native on CPU)",
        "attention default": attn_default,
        "attention --attention-backend mx_triton": (
            "sgl_kernel_rocm GQA paged decode"
            + (" (Triton interpreter)" if interp else "")
            + "; prefill delegated"
        ),
    }


def collect_info() -> dict[str, Any]:
    return {"versions": versions(), "plugin": plugin_status(), "kernels": kernel_paths()}
