"""On GPU nodes SGLang keeps its own `Mxfp4Config` / `QuarkConfig`; the plugin's AROUND hooks
hand their MoE layers to our `MxFp4MoEMethod` only when the checkpoint is an MXFP4 layout we
serve and the layer needs nothing our method lacks. Everything else stays with SGLang, with a
log line saying why."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from sglang_mx.quant.scheme import (
    MxScheme,
    MxSchemeError,
    draft_checkpoint_name,
    is_mxfp4_weight,
    parse_scheme,
    quark_act_quant,
)

logger = logging.getLogger(__name__)
# Where the Mxfp4Config AROUND hook keeps the checkpoint's quantization_config: the class itself
# keeps only `is_checkpoint_mxfp4_serialized`, not the act_quant or format we need.
RAW_CONFIG_ATTR = "_sglang_mx_quant_config"


def remember_raw_config(original, cls, config: dict[str, Any], *args, **kwargs):
    """AROUND hook on `Mxfp4Config.from_config`: keep the dict on the instance it returns."""
    instance = original(cls, config, *args, **kwargs)
    setattr(instance, RAW_CONFIG_ATTR, dict(config))
    return instance


def scheme_of(config) -> tuple[MxScheme | None, str]:
    """The MXFP4 scheme SGLang's config object describes, or None and the reason it is not ours.

    QuarkConfig keeps the checkpoint's dict as `quant_config`; Mxfp4Config keeps nothing, so
    its dict comes from `remember_raw_config`.
    """
    kind = type(config).__name__
    if kind == "QuarkConfig":
        raw = getattr(config, "quant_config", None)
    else:
        raw = getattr(config, RAW_CONFIG_ATTR, None)
        if raw is None:
            return None, f"{kind} was built without its quantization_config being recorded"
        if raw.get("format") != "sglang_mx":
            # gpt-oss's MXFP4 layout: fused `gate_up_proj_blocks` / `_scales` / `_bias` tensors
            # and an interleaved gate/up, which only SGLang's own method loads.
            return None, "quant_method mxfp4 without format sglang_mx (gpt-oss layout)"
    if not isinstance(raw, dict):
        return None, f"{kind} carries no quantization_config dict"
    try:
        return parse_scheme(raw), ""
    except MxSchemeError as e:
        return None, str(e)


def unsupported_features(layer) -> list[str]:
    """What a FusedMoE layer asks for that `MxFp4MoEMethod` does not implement."""
    cfg = layer.moe_runner_config
    found = []
    if getattr(layer, "with_bias", False):
        found.append("expert biases")
    if cfg.activation != "silu":
        found.append(f"activation {cfg.activation!r}")
    if not getattr(cfg, "is_gated", True):
        found.append("non-gated experts")
    for name in ("gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit", "swiglu_limit"):
        if getattr(cfg, name, None) is not None:
            found.append(f"{name}={getattr(cfg, name)}")
    if cfg.apply_router_weight_on_input:
        found.append("router weight applied on the input")
    return found


def excluded_as_sglang(config, prefix: str) -> bool:
    """SGLang's `should_ignore_layer` over the config's `exclude_layers` with its packed-module
    mapping; a NextN draft module is also tried under its checkpoint name, since SGLang's GLM
    NextN rewrite remaps exact names only and leaves `re:` patterns on `model.layers.N` unmatched
    (the draft would otherwise be built MXFP4 over bf16 tensors)."""
    from sglang.srt.layers.quantization.quark.utils import should_ignore_layer

    ignore = getattr(config, "exclude_layers", None) or []
    mapping = getattr(config, "packed_modules_mapping", None) or {}
    if should_ignore_layer(prefix, ignore=ignore, fused_mapping=mapping):
        return True
    ckpt = draft_checkpoint_name(prefix, getattr(config, "num_hidden_layers", None))
    return ckpt is not None and should_ignore_layer(ckpt, ignore=ignore, fused_mapping=mapping)


def quark_layer_scheme(config, layer, prefix: str, scheme: MxScheme) -> tuple[MxScheme | None, str]:
    """The scheme of one Quark MoE layer as SGLang itself decides it: its exclusion through
    SGLang's `should_ignore_layer` over `QuarkConfig.exclude_layers` (which the model code
    extends, e.g. GLM's NextN layer adds its `model.decoder.mlp.experts`, and remaps) with the
    packed-module mapping, so per-expert entries exclude the fused experts module; its weight
    and input specs through `_find_matched_config` (`layer_quant_config` patterns first, then
    the global config). None and the reason when SGLang would not load it as MXFP4."""
    if excluded_as_sglang(config, prefix):
        return None, "excluded from quantization by the checkpoint"
    try:
        matched = config._find_matched_config(prefix, layer)
    except (ValueError, KeyError) as e:
        return None, f"SGLang finds no single quant config for it ({e})"
    if not is_mxfp4_weight(matched.get("weight")):
        return None, f"its Quark weight spec {matched.get('weight')} is not MXFP4"
    try:
        act_quant = quark_act_quant(matched.get("input_tensors"), prefix)
    except MxSchemeError as e:
        return None, str(e)
    return replace(scheme, act_quant=act_quant), ""


def take_moe_layer(original, self, layer, prefix: str):
    """AROUND hook on `Mxfp4Config.get_quant_method` and `QuarkConfig.get_quant_method`."""
    from sglang.srt.layers.moe.fused_moe_triton import FusedMoE

    if not isinstance(layer, FusedMoE):
        return original(self, layer, prefix)
    scheme, why = scheme_of(self)
    if scheme is not None and scheme.source == "quark":
        scheme, why = quark_layer_scheme(self, layer, prefix, scheme)
    elif scheme is not None and scheme.is_excluded(prefix):
        scheme, why = None, "excluded from quantization by the checkpoint"
    if scheme is not None:
        missing = unsupported_features(layer)
        if missing:
            scheme, why = None, "needs " + ", ".join(missing) + ", which sglang_mx lacks"
    if scheme is not None:
        # Our kernels at this layer's shapes against their reference on this device, first.
        from sglang_mx.quant.moe_dispatch import moe_dispatch
        from sglang_mx.selfcheck.gate import moe_declined

        backend = moe_dispatch().kernel_backend or "auto"
        fallback = f"SGLang's {type(self).__name__} MoE method"
        declined = moe_declined(layer, scheme.act_quant, backend, fallback)
        if declined:
            scheme, why = None, declined
    if scheme is None:
        logger.info("sglang_mx: %s stays with SGLang's %s: %s", prefix, type(self).__name__, why)
        return original(self, layer, prefix)
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    return MxFp4MoEMethod(scheme, prefix)


def register() -> None:
    """On a GPU node, hand SGLang's MXFP4 MoE layers to our method (AROUND hooks on its
    `Mxfp4Config` and `QuarkConfig`); the plugin calls this when `moe_dispatch` says we own
    the experts."""
    from sglang_mx.sglang_version import hook

    hook(
        "sglang.srt.layers.quantization.mxfp4.Mxfp4Config.from_config",
        remember_raw_config,
        "AROUND",
    )
    for target in (
        "sglang.srt.layers.quantization.mxfp4.Mxfp4Config.get_quant_method",
        "sglang.srt.layers.quantization.quark.quark.QuarkConfig.get_quant_method",
    ):
        hook(target, take_moe_layer, "AROUND")
