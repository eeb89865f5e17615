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

    def __init__(self, scheme: MxScheme, name: str, raw: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.scheme = scheme
        self._name = name
        # The attributes SGLang's model code reads and rewrites on a config named "quark" (GLM's
        # NextN draft remaps `model.layers.N.*` to `model.decoder.*` in both), as QuarkConfig
        # keeps them: the checkpoint's dict and the exclude list.
        self.quant_config = dict(raw or {})
        # SGLang's loader adds the model's hf_config to the dict; the layer count names the MTP
        # layer in the checkpoint (`model.layers.<num_hidden_layers>.*`).
        hf_config = self.quant_config.pop("hf_config", None)
        self.num_hidden_layers = getattr(hf_config, "num_hidden_layers", None)
        self.quant_config.setdefault("layer_quant_config", {})
        self.quant_config.setdefault("layer_type_quant_config", {})
        self.exclude_layers = list(scheme.exclude)
        # SGLang's loader adds the model class's fused-module map (fused_qkv_a_proj_with_mqa,
        # gate_up_proj) to the dict; QuarkConfig reads it from there, so the NextN draft (whose
        # config is a copy of this one) sees it too.
        mapping = self.quant_config.get("packed_modules_mapping")
        if mapping:
            self.packed_modules_mapping = dict(mapping)

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
        return cls(scheme, scheme.source, config)

    def excluded(self, prefix: str) -> bool:
        """SGLang's own exclusion rule (`should_ignore_layer`): exact names and `re:` patterns,
        per-expert entries excluding the fused experts module, fused q/k/v and gate/up layers
        excluded when each part is; over `exclude_layers` as the model code left it (and a NextN
        draft module also by its checkpoint name, for `re:` excludes SGLang does not remap)."""
        from sglang_mx.quant.takeover import excluded_as_sglang

        return excluded_as_sglang(self, prefix)

    def _layer_scheme(self, layer: torch.nn.Module, prefix: str) -> MxScheme:
        """This layer's scheme, with Quark's `layer_quant_config` patterns matched as SGLang
        matches them; a pattern that is not MXFP4 cannot be served on this platform."""
        if self.scheme.source != "quark" or not self.quant_config.get("layer_quant_config"):
            return self.scheme
        from sglang_mx.quant.takeover import quark_layer_scheme

        scheme, why = quark_layer_scheme(self, layer, prefix, self.scheme)
        if scheme is None:
            raise NotImplementedError(
                f"layer {prefix!r}: {why}; the sglang_mx CPU platform serves MXFP4 or "
                "unquantized layers only"
            )
        return scheme

    # SGLang's QuarkConfig matcher, used by `quark_layer_scheme`; it reads only
    # `quant_config` and `packed_modules_mapping`, which this class keeps as QuarkConfig does.
    def _find_matched_config(self, layer_name: str, module: torch.nn.Module) -> dict[str, Any]:
        from sglang.srt.layers.quantization.quark.quark import QuarkConfig

        return QuarkConfig._find_matched_config(self, layer_name, module)

    def get_quant_method(self, layer: torch.nn.Module, prefix: str) -> QuantizeMethodBase | None:
        from sglang.srt.layers.linear import LinearBase
        from sglang.srt.layers.moe.fused_moe_triton import FusedMoE
        from sglang.srt.layers.quantization.unquant import UnquantizedLinearMethod

        if isinstance(layer, FusedMoE):
            if self.excluded(prefix):
                return None  # SGLang's UnquantizedFusedMoEMethod: bf16 experts (an MTP draft)
            from sglang_mx.quant.moe_method import MxFp4MoEMethod

            return MxFp4MoEMethod(self._layer_scheme(layer, prefix), prefix)
        if isinstance(layer, LinearBase):
            if self.excluded(prefix) or not self._linear_is_mxfp4(layer, prefix):
                return UnquantizedLinearMethod()
            from sglang_mx.quant.quark_layout import servable_linear

            problem = servable_linear(prefix)
            if problem:
                raise NotImplementedError(
                    f"layer {prefix!r} is MXFP4-quantized by this checkpoint's "
                    f"quantization_config, but {problem}"
                )
            from sglang_mx.quant.linear_method import MxFp4LinearMethod

            return MxFp4LinearMethod(self._layer_scheme(layer, prefix), prefix)
        return None

    def _linear_is_mxfp4(self, layer: torch.nn.Module, prefix: str) -> bool:
        """Whether SGLang's Quark matcher gives this (not excluded) linear an MXFP4 weight; a
        quantized spec that is not MXFP4 (FP8 attention in `layer_quant_config`) is refused."""
        if self.scheme.source != "quark":
            return False
        from sglang_mx.quant.scheme import describe_weight, is_mxfp4_weight

        if not (
            self.quant_config.get("global_quant_config")
            or self.quant_config.get("layer_quant_config")
        ):
            return self.scheme.quantizes_linear  # built from a scheme alone, no Quark dict
        weight = (self._find_matched_config(prefix, layer) or {}).get("weight")
        if not weight or is_mxfp4_weight(weight):
            return bool(weight)
        raise NotImplementedError(
            f"layer {prefix!r}: this checkpoint's quantization_config quantizes it as "
            f"{describe_weight(weight)}, not MXFP4; the sglang_mx CPU platform serves MXFP4 or "
            "unquantized layers only, and SGLang's QuarkConfig has no such scheme without a GPU"
        )

    def get_scaled_act_names(self) -> list[str]:
        return []
