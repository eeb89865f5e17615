"""Who runs the MXFP4 MoE experts in this process: the one decision the plugin (take SGLang's
MXFP4 MoE layers or not), the MoE method (which kernel backend it asks for) and `sglang-mx info`
(what it reports) all read, so the report cannot drift from what dispatches."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.env import ENV


@dataclass(frozen=True)
class MoeDispatch:
    owner: str  # "sglang_mx" (our MxFp4MoEMethod) or "sglang" (SGLang's own MoE method)
    kernel_backend: str  # what MxFp4MoEMethod passes to fused_moe_mxfp4 ("" when SGLang owns)
    reason: str


def moe_dispatch() -> MoeDispatch:
    """The MoE owner and requested kernel backend for this process's environment."""
    if ENV.disabled:
        return MoeDispatch("sglang", "", "SGLANG_MX_DISABLE=1: plain SGLang")
    backend = ENV.moe_backend
    if backend == "sglang" and not ENV.platform_wanted():
        return MoeDispatch("sglang", "", "SGLANG_MX_MOE_BACKEND=sglang on a GPU node")
    if backend == "sglang":
        # The mx_cpu platform has no SGLang MXFP4 MoE to defer to: our method serves the layer.
        return MoeDispatch("sglang_mx", "auto", "SGLang has no CPU MXFP4 MoE; ours runs")
    return MoeDispatch("sglang_mx", backend, f"SGLANG_MX_MOE_BACKEND={backend}")


def describe_moe(device_type: str, arch: str) -> str:
    """What runs the experts for weights on `device_type` ("cpu"/"cuda") of GPU arch `arch`."""
    d = moe_dispatch()
    if d.owner == "sglang":
        return f"SGLang's own MXFP4 MoE method (Mxfp4Config/QuarkConfig) [{d.reason}]"
    from sgl_kernel_rocm.moe import resolve_backend
    from sgl_kernel_rocm.moe.config import choose_path

    backend = resolve_backend(d.kernel_backend, device_type)
    if backend == "torch":
        return (
            f"torch reference (sgl_kernel_rocm.moe.reference, vectorized per expert) [{d.reason}]"
        )
    half, fp32 = choose_path(arch, False), choose_path(arch, True)
    where = " (Triton interpreter)" if device_type == "cpu" else ""
    return (
        f"Triton fused MoE{where}, {half} for bf16/fp16 activations, {fp32} for fp32 [{d.reason}]"
    )
