"""SGLang linear method for MXFP4 linears (Quark checkpoints' dense MLPs and shared experts):
holds the checkpoint's packed E2M1 `weight` [out, in/2] and E8M0 `weight_scale` [out, in/32],
dequantizes them once at load (exact in bf16: E2M1 values times a power of two) and runs a
matmul. W4A4 rounds the activations through MXFP4 along `in` first, as the MoE reference does."""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from sglang.srt.layers.quantization.base_config import LinearMethodBase
from sglang.srt.utils import set_weight_attrs

from sglang_mx.quant.scheme import MxScheme

BLOCK = 32
logger = logging.getLogger(__name__)


class MxFp4LinearMethod(LinearMethodBase):
    def __init__(self, scheme: MxScheme, prefix: str = "") -> None:
        self.scheme = scheme
        self.prefix = prefix

    def create_weights(
        self,
        layer: torch.nn.Module,
        input_size_per_partition: int,
        output_partition_sizes: list[int],
        input_size: int,
        output_size: int,
        params_dtype: torch.dtype,
        **extra_weight_attrs,
    ) -> None:
        if input_size_per_partition % BLOCK:
            raise ValueError(
                f"{self.prefix}: input size per TP rank {input_size_per_partition} is not a "
                f"multiple of the MXFP4 block ({BLOCK})"
            )
        out = sum(output_partition_sizes)
        for name, cols in (
            ("weight", input_size_per_partition // 2),
            ("weight_scale", input_size_per_partition // BLOCK),
        ):
            param = torch.nn.Parameter(
                torch.zeros(out, cols, dtype=torch.uint8), requires_grad=False
            )
            # Both shard along `out` like a plain weight; `in` is packed 2:1 or grouped 32:1.
            set_weight_attrs(param, {"input_dim": 1, "output_dim": 0})
            layer.register_parameter(name, param)
            set_weight_attrs(param, extra_weight_attrs)
        layer.mx_dtype = params_dtype
        logger.info(
            "sglang_mx: MXFP4 linear %s: %d x %d, %s",
            self.prefix,
            out,
            input_size_per_partition,
            "W4A4" if self.scheme.act_quant == "mxfp4" else "W4A16",
        )

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        from sgl_kernel_rocm.mx import dequantize_mxfp4

        if bool((layer.weight_scale.data == 0xFF).any()):
            raise ValueError(
                f"{self.prefix}.weight_scale holds E8M0 NaN scales (0xFF): the checkpoint is "
                "corrupt or was not written as MXFP4"
            )
        layer.mx_dequantized = dequantize_mxfp4(
            layer.weight.data, layer.weight_scale.data, dtype=layer.mx_dtype
        )

    def apply(
        self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        weight = layer.mx_dequantized
        if self.scheme.act_quant == "mxfp4":
            from sgl_kernel_rocm.moe.reference import fake_quant_mxfp4

            x = fake_quant_mxfp4(x.float()).to(x.dtype)
        return F.linear(x, weight.to(x.dtype), bias)
