"""Which MXFP4 scheme a checkpoint's `quantization_config` describes, validated up front.

Quantized projections are stored as `X.weight` (uint8, two E2M1 values per byte, even element
in the low nibble) and `X.weight_scale` (uint8 E8M0, one per 32 elements along the input dim).
Two layouts are accepted:

- ours: {"quant_method": "mxfp4", "format": "sglang_mx", "act_quant": "none"|"mxfp4"}, routed
  experts only (written by `sglang-mx quantize`);
- AMD Quark: {"quant_method": "quark", "global_quant_config" | "layer_quant_config": weight fp4
  per_group 32 e8m0 static, input_tensors null (w4a16) or fp4 per_group 32 dynamic (w4a4),
  "exclude": [...]}: every linear not excluded is MXFP4 (`quantizes_linear`), which for
  DeepSeek-family checkpoints means routed experts, and shared experts and dense MLPs unless
  excluded (`sglang-mx quantize --format quark` writes both variants).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

ACT_QUANTS = ("none", "mxfp4")


class MxSchemeError(ValueError):
    """The checkpoint's quantization_config is not an MXFP4 layout we can serve."""


@dataclass(frozen=True)
class MxScheme:
    source: str  # "mxfp4" or "quark"
    act_quant: str  # "none" (W4A16) or "mxfp4" (W4A4)
    exclude: tuple[str, ...] = field(default_factory=tuple)
    # Quark only: whether layers outside the MoE experts are quantized unless excluded.
    quantizes_linear: bool = False
    # Quark only: `layer_quant_config` patterns in order, each with whether its weight is MXFP4
    # and a short description of its weight spec (e.g. GLM-5.2-AttnFP8's "*self_attn*" FP8).
    layer_weights: tuple[tuple[str, bool, str], ...] = ()

    def is_excluded(self, prefix: str) -> bool:
        """As SGLang's Quark loader reads "exclude": `re:` entries match from the start of the
        module name (re.match), anything else must equal it."""
        for pattern in self.exclude:
            if pattern.startswith("re:"):
                if re.match(pattern[3:], prefix):
                    return True
            elif prefix == pattern:
                return True
        return False

    def layer_pattern(self, module: str) -> tuple[str, bool, str] | None:
        """The first `layer_quant_config` pattern naming `module` (fnmatch, as SGLang's
        `QuarkConfig._find_matched_config` matches them): (pattern, is MXFP4, weight spec)."""
        for entry in self.layer_weights:
            if fnmatch.fnmatch(module, entry[0]):
                return entry
        return None

    def is_mxfp4(self, module: str) -> bool:
        """Whether a `module` that is not excluded is stored as MXFP4 (ours: every quantized
        module; Quark: per `layer_quant_config`, else the global config)."""
        if self.source != "quark":
            return True
        entry = self.layer_pattern(module)
        return self.quantizes_linear if entry is None else entry[1]


# The NextN (MTP) draft's own modules, which SGLang names `model.<name>`; the rest of its layer
# is `model.decoder.*`. In the checkpoint both live under `model.layers.<num_hidden_layers>.*`.
NEXTN_OWN = ("eh_proj", "enorm", "hnorm", "shared_head")


def draft_checkpoint_name(prefix: str, num_hidden_layers: int | None) -> str | None:
    """The checkpoint name of a NextN draft module (`model.decoder.mlp.experts` ->
    `model.layers.N.mlp.experts`), or None for a module of the target model. SGLang's GLM NextN
    rewrite remaps exact-name excludes only; a `re:` pattern written against the checkpoint's
    MTP layer (DeepSeek's 're:model.layers.61.*') must be matched against this name."""
    if num_hidden_layers is None:
        return None
    layer = f"model.layers.{num_hidden_layers}"
    if prefix.startswith("model.decoder."):
        return layer + prefix[len("model.decoder") :]
    if prefix.startswith("model.") and prefix.split(".")[1] in NEXTN_OWN:
        return layer + prefix[len("model") :]
    return None


def describe_weight(spec: dict[str, Any] | None) -> str:
    if not spec:
        return "unquantized"
    return " ".join(str(spec.get(k)) for k in ("dtype", "qscheme") if spec.get(k) is not None)


def is_mxfp4_weight(spec: dict[str, Any] | None) -> bool:
    return bool(
        spec
        and spec.get("dtype") == "fp4"
        and spec.get("qscheme") == "per_group"
        and spec.get("group_size") == 32
        and spec.get("scale_format") == "e8m0"
        and not spec.get("is_dynamic")
    )


def quark_act_quant(spec: dict[str, Any] | None, where: str) -> str:
    if not spec:
        return "none"
    if (
        spec.get("dtype") == "fp4"
        and spec.get("qscheme") == "per_group"
        and spec.get("group_size") == 32
        and spec.get("is_dynamic", True)
    ):
        return "mxfp4"
    raise MxSchemeError(
        f"Quark {where}.input_tensors={spec} is not supported: expected null (w4a16) or dynamic "
        "fp4 per_group group_size 32 (w4a4)"
    )


def parse_scheme(config: dict[str, Any]) -> MxScheme:
    method = str(config.get("quant_method", "")).lower()
    if method == "mxfp4":
        act = str(config.get("act_quant", "none")).lower()
        if act not in ACT_QUANTS:
            raise MxSchemeError(
                f"quantization_config.act_quant={act!r}: expected one of {ACT_QUANTS}"
            )
        # "block_size", not "weight_block_size": SGLang reads the latter as an FP8 [n, k] block.
        block = config.get("block_size", 32)
        if block != 32:
            raise MxSchemeError(f"quantization_config.block_size={block}: MXFP4 blocks are 32")
        ignored = config.get("ignored_layers") or config.get("modules_to_not_convert") or []
        return MxScheme(source="mxfp4", act_quant=act, exclude=tuple(ignored))
    if method == "quark":
        layer_cfgs = config.get("layer_quant_config") or {}
        expert_cfg = None
        for pattern, cfg in layer_cfgs.items():
            if "expert" in pattern:
                expert_cfg = cfg
                break
        global_cfg = config.get("global_quant_config") or {}
        spec = expert_cfg or global_cfg
        where = "layer_quant_config[experts]" if expert_cfg else "global_quant_config"
        if not is_mxfp4_weight(spec.get("weight")):
            raise MxSchemeError(
                f"Quark {where}.weight={spec.get('weight')} is not MXFP4 (fp4, per_group, "
                "group_size 32, e8m0 scales, static)"
            )
        return MxScheme(
            source="quark",
            act_quant=quark_act_quant(spec.get("input_tensors"), where),
            exclude=tuple(config.get("exclude") or ()),
            quantizes_linear=is_mxfp4_weight(global_cfg.get("weight")),
            layer_weights=tuple(
                (pattern, is_mxfp4_weight(cfg.get("weight")), describe_weight(cfg.get("weight")))
                for pattern, cfg in layer_cfgs.items()
            ),
        )
    raise MxSchemeError(f"quant_method={method!r} is not an MXFP4 layout (mxfp4 or quark)")
