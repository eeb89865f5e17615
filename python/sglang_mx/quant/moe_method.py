"""SGLang FusedMoE method for MXFP4 experts: holds packed E2M1 weights and E8M0 scales in
SGLang's w13/w2 layout and runs the experts through `sgl_kernel_rocm.moe.fused_moe_mxfp4`
(torch reference on CPU tensors, Triton kernels on GPU tensors)."""

from __future__ import annotations

import logging

import torch
from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoeWeightScaleSupported
from sglang.srt.layers.quantization.base_config import FusedMoEMethodBase
from sglang.srt.utils import set_weight_attrs

from sglang_mx.quant.moe_dispatch import moe_dispatch
from sglang_mx.quant.scheme import MxScheme

BLOCK = 32
logger = logging.getLogger(__name__)
# Above this, the CPU reference dequantizes per call rather than holding fp32 copies.
PREPARE_LIMIT_BYTES = 2 << 30


class MxFp4MoEMethod(FusedMoEMethodBase):
    def __init__(self, scheme: MxScheme, prefix: str = "") -> None:
        self.scheme = scheme
        self.prefix = prefix
        self.moe_runner_config = None
        self.prepared = None
        self.kernel_backend = moe_dispatch().kernel_backend or "auto"

    def create_weights(
        self,
        layer: torch.nn.Module,
        num_experts: int,
        hidden_size: int,
        intermediate_size_per_partition: int,
        params_dtype: torch.dtype,
        **extra_weight_attrs,
    ) -> None:
        for dim, what in (
            (hidden_size, "hidden_size"),
            (intermediate_size_per_partition, "moe intermediate size per TP rank"),
        ):
            if dim % BLOCK:
                raise ValueError(
                    f"{self.prefix}: {what}={dim} is not a multiple of the MXFP4 block ({BLOCK}); "
                    "choose a TP/EP layout that keeps each expert shard a multiple of 32"
                )
        inter = intermediate_size_per_partition
        logger.info(
            "sglang_mx: MXFP4 experts %s: %d experts, hidden %d, intermediate %d, %s, kernels %s",
            self.prefix,
            num_experts,
            hidden_size,
            inter,
            "W4A4" if self.scheme.act_quant == "mxfp4" else "W4A16",
            self.kernel_backend,
        )
        shapes = {
            "w13_weight": (num_experts, 2 * inter, hidden_size // 2),
            "w13_weight_scale": (num_experts, 2 * inter, hidden_size // BLOCK),
            "w2_weight": (num_experts, hidden_size, inter // 2),
            "w2_weight_scale": (num_experts, hidden_size, inter // BLOCK),
        }
        for name, shape in shapes.items():
            param = torch.nn.Parameter(torch.zeros(shape, dtype=torch.uint8), requires_grad=False)
            layer.register_parameter(name, param)
            set_weight_attrs(param, extra_weight_attrs)
            if name.endswith("_scale"):
                # group scales shard like the weights they scale
                set_weight_attrs(param, {"quant_method": FusedMoeWeightScaleSupported.GROUP.value})

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        # Scale byte 0xFF is NaN in E8M0: a block of NaNs would poison every token routed there.
        for name in ("w13_weight_scale", "w2_weight_scale"):
            if bool((getattr(layer, name).data == 0xFF).any()):
                raise ValueError(
                    f"{self.prefix}.{name} holds E8M0 NaN scales (0xFF): the checkpoint is corrupt "
                    "or was not written as MXFP4"
                )
        self.prepared = None
        from sgl_kernel_rocm.moe import prepare_weights

        weights = self._weights(layer)
        # What the Triton kernels may assume about these weights (one check at load, not per
        # call): int32 word loads and the one-multiply FP4 upcast when every scale allows it.
        self.layout = prepare_weights(weights)
        dequantized_bytes = (weights.w13.numel() + weights.w2.numel()) * 2 * 4
        if (
            weights.w13.device.type == "cpu"
            and self.kernel_backend in ("auto", "torch")
            and dequantized_bytes <= PREPARE_LIMIT_BYTES
        ):
            from sgl_kernel_rocm.moe import prepare_reference_weights

            # CPU reference path: dequantize once at load instead of on every forward.
            self.prepared = prepare_reference_weights(weights, dtype=torch.float32)

    @staticmethod
    def _weights(layer: torch.nn.Module):
        """The layer's expert parameters as the kernels take them (views, no copy)."""
        from sgl_kernel_rocm.moe import MoEWeights

        return MoEWeights(
            layer.w13_weight, layer.w13_weight_scale, layer.w2_weight, layer.w2_weight_scale
        )

    def create_moe_runner(self, layer: torch.nn.Module, moe_runner_config) -> None:
        self.moe_runner_config = moe_runner_config
        if moe_runner_config.activation != "silu":
            raise NotImplementedError(
                f"{self.prefix}: MXFP4 experts support SwiGLU (silu) only, got "
                f"{moe_runner_config.activation!r}"
            )

    def get_moe_runner_backend(self, layer: torch.nn.Module):
        # None: we consume SGLang's standard TopK output directly (local expert ids).
        return None

    def apply(self, layer: torch.nn.Module, dispatch_output):
        from sgl_kernel_rocm.moe import fused_moe_mxfp4
        from sglang.srt.layers.moe.token_dispatcher import StandardCombineInput

        topk_weights, topk_ids, _ = dispatch_output.topk_output
        topk_weights = topk_weights.float()
        factor = self._routed_scale(layer)
        if factor != 1.0:
            # sum_k (f w_k) y_k = f sum_k w_k y_k: scaling the [T, K] weights is the cheap place.
            topk_weights = topk_weights * factor
        out = fused_moe_mxfp4(
            dispatch_output.hidden_states,
            self._weights(layer),
            topk_weights,
            topk_ids,
            act_quant=self.scheme.act_quant,
            backend=self.kernel_backend,
            prepared=self.prepared,
            layout=getattr(self, "layout", None),
        )
        return StandardCombineInput(hidden_states=out)

    def _routed_scale(self, layer: torch.nn.Module) -> float:
        """The routed scaling factor this method must apply: SGLang applies it in the model or
        the router on every platform but CUDA (see `moe_dispatch.routed_scaling`)."""
        cached = getattr(self, "_routed_scale_value", None)
        if cached is not None:
            return cached
        from sglang_mx.quant.moe_dispatch import routed_scaling

        factor = getattr(layer.moe_runner_config, "routed_scaling_factor", None)
        decision = routed_scaling(layer)
        value = float(factor) if factor is not None and decision.in_experts else 1.0
        if factor not in (None, 1.0):
            logger.info(
                "sglang_mx: %s routed_scaling_factor %s applied by the %s (%s)",
                self.prefix,
                factor,
                decision.owner,
                decision.reason,
            )
        self._routed_scale_value = value
        return value
