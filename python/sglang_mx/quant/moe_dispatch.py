"""Who runs the MXFP4 MoE experts in this process: the one decision the plugin (take SGLang's
MXFP4 MoE layers or not), the MoE method (which kernel backend it asks for) and `sglang-mx info`
(what it reports) all read, so the report cannot drift from what dispatches."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.env import ENV
from sglang_mx.platform_choice import serves_every_layer


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
    if backend == "sglang" and not serves_every_layer():
        return MoeDispatch("sglang", "", "SGLANG_MX_MOE_BACKEND=sglang on a GPU node")
    if backend == "sglang":
        # Our platforms (mx_cpu, mx_cuda) have no SGLang MXFP4 MoE to defer to: ours serves.
        return MoeDispatch("sglang_mx", "auto", "our platform has no SGLang MXFP4 MoE; ours runs")
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


@dataclass(frozen=True)
class RoutedScaling:
    """Who multiplies the routed-expert sum by `routed_scaling_factor` on this platform."""

    owner: str  # "model" (the MoE block after the experts), "router" (top-k weights) or "experts"
    reason: str

    @property
    def in_experts(self) -> bool:
        return self.owner == "experts"


def routed_scaling(layer=None) -> RoutedScaling:
    """Where SGLang 0.5.23 applies the routed scaling factor for GLM/DeepSeek MoE blocks, read
    from the same module flags SGLang branches on, so our MoE method applies it exactly when
    nobody else does:

    - CPU, ROCm without aiter: `Glm4MoeSparseMoeBlock.forward_normal` / `DeepseekV2MoE.
      forward_normal` multiply the experts' output (`not _is_cuda and not _use_aiter`).
    - ROCm with aiter: `aiter_biased_grouped_topk` folds it into the top-k weights (SGLang's
      `is_routed_scaling_factor_fused_in_topk`); the model does not multiply.
    - a2a (DeepEP-style) dispatch: `forward_deepep` multiplies unless the router folded it.
    - a layer whose router is asked to fold it (`should_fuse_routed_scaling_factor_in_topk`).
    - CUDA: nobody does; SGLang's own MoE runners multiply inside their combine step, so ours
      must too.
    """
    from sglang.srt.layers.moe import topk as sgl_topk
    from sglang.srt.layers.moe.utils import get_moe_a2a_backend

    if layer is not None and getattr(layer, "should_fuse_routed_scaling_factor_in_topk", False):
        return RoutedScaling("router", "the layer asks TopK to fold the factor into its weights")
    if sgl_topk._use_aiter:
        return RoutedScaling("router", "ROCm + aiter: the grouped top-k router folds the factor")
    if not sgl_topk._is_cuda:
        where = "ROCm without aiter" if sgl_topk._is_hip else "CPU"
        return RoutedScaling("model", f"{where}: the model's MoE block multiplies the output")
    if not get_moe_a2a_backend().is_none():
        return RoutedScaling("model", "a2a MoE dispatch: forward_deepep multiplies the output")
    return RoutedScaling("experts", "CUDA: SGLang leaves the factor to the MoE method")
