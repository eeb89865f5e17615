"""SGLang QuantizationConfig for MXFP4 checkpoints on the sglang_mx CPU platform: experts ->
`MxFp4MoEMethod`, MXFP4 MLP linears (Quark's dense MLPs, shared experts) -> `MxFp4LinearMethod`,
everything else stays in the checkpoint's higher precision."""

from __future__ import annotations

from typing import Any

import torch
from sglang.srt.layers.quantization.base_config import QuantizationConfig, QuantizeMethodBase

from sglang_mx.quant.scheme import MxScheme, parse_scheme


class MxFp4ExpertsConfig(QuantizationConfig):
    """Registered for quant_method "mxfp4" and "quark" on the sglang_mx CPU platform."""

    def __init__(self, scheme: MxScheme, name: str) -> None:
        super().__init__()
        self.scheme = scheme
        self._name = name

    def get_name(self) -> str:
        return self._name

    @classmethod
    def get_supported_act_dtypes(cls) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16, torch.float32]

    @classmethod
    def get_min_capability(cls) -> int:
        return 0

    @staticmethod
    def get_config_filenames() -> list[str]:
        return []

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> MxFp4ExpertsConfig:
        scheme = parse_scheme(config)
        return cls(scheme, scheme.source)

    def get_quant_method(self, layer: torch.nn.Module, prefix: str) -> QuantizeMethodBase | None:
        from sglang.srt.layers.linear import LinearBase
        from sglang.srt.layers.moe.fused_moe_triton import FusedMoE
        from sglang.srt.layers.quantization.unquant import UnquantizedLinearMethod

        if isinstance(layer, FusedMoE):
            from sglang_mx.quant.moe_method import MxFp4MoEMethod

            return MxFp4MoEMethod(self.scheme, prefix)
        if isinstance(layer, LinearBase):
            if self.scheme.quantizes_linear and not self._linear_excluded(prefix):
                from sglang_mx.quant.quark_layout import servable_linear

                problem = servable_linear(prefix)
                if problem:
                    raise NotImplementedError(
                        f"layer {prefix!r} is MXFP4-quantized by this checkpoint's "
                        f"quantization_config, but {problem}"
                    )
                from sglang_mx.quant.linear_method import MxFp4LinearMethod

                return MxFp4LinearMethod(self.scheme, prefix)
            return UnquantizedLinearMethod()
        return None

    def _linear_excluded(self, prefix: str) -> bool:
        # SGLang fuses q/k/v and gate/up: the fused layer is excluded if each part is.
        leaf = prefix.rsplit(".", 1)[-1]
        parts = self.packed_modules_mapping.get(leaf)
        if not parts:
            return self.scheme.is_excluded(prefix)
        base = prefix[: -len(leaf)]
        return all(self.scheme.is_excluded(base + p) for p in parts)

    def get_scaled_act_names(self) -> list[str]:
        return []
