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
    "smg",
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
    from sglang.srt.platforms import current_platform

    cls = type(current_platform)
    kind = "out-of-tree" if current_platform.is_out_of_tree() else "in-tree"
    out["platform SGLang will use"] = f"{cls.__module__}.{cls.__name__} ({kind})"
    out.update(standin_status())
    return out


def standin_status() -> dict[str, str]:
    """Whether torchvision / sgl_kernel resolve to the real package or our CPU stand-in."""
    import importlib.util

    from sglang_mx.platform_choice import real_package_available
    from sglang_mx.seam.cpu_setup import SHIMS

    out = {}
    for name in sorted(SHIMS):
        if real_package_available(name):
            out[name] = "real package"
        elif importlib.util.find_spec(name) is not None:
            out[name] = "sglang_mx CPU stand-in (raises by name when called)"
        else:
            out[name] = "missing (run `python -m sglang_mx.seam.venv_shims` on a CPU box)"
    return out


def _router_forward() -> str:
    """The TopK forward SGLang's fused-op dispatch picks here, from its own resolution steps
    (`sglang.kernels.fused_op`: out-of-tree platform key, else the in-tree platform key)."""
    import warnings

    from sglang.kernels import fused_op

    try:
        with warnings.catch_warnings():  # SGLang warns at import about GPU-only quant methods
            warnings.simplefilter("ignore")
            from sglang.srt.layers.moe.topk import TopK
    except ImportError as e:
        return f"unknown: SGLang's MoE layers do not import here ({e})"

    # Reads (never patches) SGLang 0.5.23's dispatch privates; if they move, the row says so.
    probe = object.__new__(TopK)  # the lookups read the class, not a built layer's state
    try:
        oot = fused_op._oot_dispatch_key()
        if oot is not None:
            registered = TopK._oot_forward_registry.get(oot, {}).get(TopK)
            method = registered or probe._platform_method(oot)
            where = f"platform key {oot!r}"
        else:
            key = fused_op._platform_key()
            method = probe._platform_method(key)
            where = f"in-tree key {key!r}; SGLang may prefer a kernel backend on GPUs"
    except AttributeError as e:
        return f"unknown: SGLang's fused-op dispatch changed ({e})"
    return f"SGLang TopK.{getattr(method, '__name__', 'forward_native')} ({where})"


def _default_attention() -> str:
    from sglang.srt.platforms import current_platform

    if current_platform.is_out_of_tree():
        return current_platform.get_default_attention_backend()
    return "SGLang's default for this device"


MOE_ROW = "MXFP4 MoE experts (quant_method mxfp4/quark)"


def kernel_paths() -> dict[str, str]:
    """Per op, what this machine runs: each line comes from the code that dispatches it."""
    from sgl_kernel_rocm.arch import current_arch

    from sglang_mx.quant.moe_dispatch import describe_moe

    cpu = ENV.platform_wanted()
    arch = "cpu" if cpu else current_arch()
    interp = " (Triton interpreter)" if cpu else ""
    return {
        "arch": arch,
        MOE_ROW: describe_moe("cpu" if cpu else "cuda", arch),
        "MoE router (sigmoid + bias top-k)": _router_forward(),
        "attention default": _default_attention(),
        "attention --attention-backend mx_triton": (
            "not registered (SGLANG_MX_DISABLE=1)"
            if ENV.disabled
            else f"sgl_kernel_rocm GQA paged decode{interp}; prefill delegated"
        ),
    }


def layer_report(kernels: dict[str, str]) -> dict[str, str]:
    from sglang_mx.layer_map import layer_kinds

    gqa = kernels["attention default"]
    if not ENV.disabled:
        mx_triton = kernels["attention --attention-backend mx_triton"]
        gqa += f"; --attention-backend mx_triton: {mx_triton}"
    return layer_kinds(kernels["arch"] == "cpu", kernels[MOE_ROW], gqa)


def collect_info() -> dict[str, Any]:
    kernels = kernel_paths()
    return {
        "versions": versions(),
        "plugin": plugin_status(),
        "kernels": kernels,
        "layers": layer_report(kernels),
        "self-check": self_check_report(),
    }


def self_check_report() -> dict[str, str]:
    """Each op's serving self-check result, from the records serving processes write."""
    from sglang_mx.selfcheck.record import summary

    return summary()
