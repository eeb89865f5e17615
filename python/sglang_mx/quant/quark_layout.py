"""AMD Quark's MXFP4 checkpoint layout for DeepSeek-family models (GLM-4.5/5, DeepSeek-V3):
the `quantization_config` Quark exports and which tensors it quantizes.

Two layouts, both W4A4 by default as AMD ships them:

- "full": every MLP projection is MXFP4 (routed experts, shared experts, dense MLPs); attention
  (`self_attn.*`, the DSA indexer included), the router (`mlp.gate`), lm_head and any MTP layer
  are excluded, as SGLang's defaults for amd/DeepSeek-V3.2-mxfp4 say;
- "experts": routed experts only; shared experts and dense MLPs are excluded too.

A quantized linear `X` stores `X.weight` uint8 [out, in/2] (two E2M1 codes per byte, the even
element in the low nibble) and `X.weight_scale` uint8 E8M0 [out, in/32], scaled along `in`.
"""

from __future__ import annotations

import re
from typing import Any

from sglang_mx.quant.scheme import MxScheme

LAYOUTS = ("full", "experts")
# The linears sglang_mx serves in MXFP4: MLP projections, and the MTP layer's `eh_proj` (GLM-5 and
# GLM-5.1's Quark exports pack it; SGLang builds it as a Quark linear in the NextN draft).
MLP_PROJECTION = re.compile(
    r"^(?P<module>.*\.mlp\.(?:.*\.)?(?:gate|up|down)_proj|(?:.*\.)?eh_proj)\.weight$"
)


def _spec(dynamic: bool) -> dict[str, Any]:
    return {
        "dtype": "fp4",
        "is_dynamic": dynamic,
        "qscheme": "per_group",
        "ch_axis": -1,
        "group_size": 32,
        "block_size": None,
        "symmetric": None,
        "round_method": "half_even",
        "scale_type": "float",
        "scale_format": "e8m0",
        "mx_element_dtype": None,
        "is_scale_quant": False,
    }


def exclude_list(config: dict[str, Any], layout: str) -> list[str]:
    if layout not in LAYOUTS:
        raise ValueError(f"Quark layout must be one of {LAYOUTS}, got {layout!r}")
    exclude = ["lm_head", "re:.*self_attn.*", "re:.*mlp\\.gate$"]
    layers = int(config.get("num_hidden_layers") or 0)
    for i in range(int(config.get("num_nextn_predict_layers") or 0)):
        exclude.append(f"re:model\\.layers\\.{layers + i}\\..*")
    if layout == "experts":
        exclude.append("re:.*shared_experts.*")
        for i in range(int(config.get("first_k_dense_replace") or 0)):
            exclude.append(f"re:model\\.layers\\.{i}\\.mlp\\..*")
    return exclude


def quantization_config(config: dict[str, Any], act_quant: str, layout: str) -> dict[str, Any]:
    """The `quantization_config` a Quark MXFP4 export of this model carries."""
    if act_quant not in ("none", "mxfp4"):
        raise ValueError(f"act_quant must be 'none' (W4A16) or 'mxfp4' (W4A4), got {act_quant!r}")
    return {
        "quant_method": "quark",
        "global_quant_config": {
            "weight": _spec(dynamic=False),
            "input_tensors": _spec(dynamic=True) if act_quant == "mxfp4" else None,
            "output_tensors": None,
            "bias": None,
            "target_device": None,
        },
        "exclude": exclude_list(config, layout),
        "layer_type_quant_config": {},
        "layer_quant_config": {},
        "kv_cache_quant_config": {},
        "kv_cache_post_rope": False,
        "algo_config": None,
        "softmax_quant_spec": None,
        "quant_mode": "eager_mode",
        "export": {
            "kv_cache_group": [],
            "min_kv_scale": 0.0,
            "pack_method": "reorder",
            "weight_format": "real_quantized",
            "weight_merge_groups": None,
        },
    }


def quantized_module(name: str, scheme: MxScheme) -> str | None:
    """The module whose weight `name` is stored as MXFP4 under `scheme`, else None."""
    m = MLP_PROJECTION.match(name)
    if not m or ".mlp.gate." in name:
        return None
    module = m.group("module")
    if scheme.source == "quark":
        return None if scheme.is_excluded(module) or not scheme.is_mxfp4(module) else module
    return module if ".mlp.experts." in module else None


def servable_linear(module: str) -> str:
    """Why sglang_mx cannot serve `module` as an MXFP4 linear ("" when it can)."""
    if ".self_attn." in module or module.endswith(".self_attn"):
        return (
            "sglang_mx serves MXFP4 only in MLP projections (routed experts, shared experts, "
            "dense MLPs); attention and the DSA indexer must be excluded ('re:.*self_attn.*')"
        )
    if module.endswith(".mlp.gate") or ".mlp.gate." in module:
        return "the MoE router (mlp.gate) must stay unquantized ('re:.*mlp\\.gate$')"
    if module == "eh_proj" or module.endswith(".eh_proj"):
        return ""  # the MTP layer's projection of [embedding; hidden]
    if not re.match(r"^.*\.mlp\.(?:.*\.)?(?:gate_up|gate|up|down)_proj$", module):
        return "sglang_mx serves MXFP4 only in MLP gate/up/down projections and the MTP eh_proj"
    return ""
