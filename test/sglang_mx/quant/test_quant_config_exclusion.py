"""The CPU platform's quantization config decides exclusion as SGLang does (its own
`should_ignore_layer`), keeps the attributes SGLang's model code rewrites on a "quark" config,
and survives GLM-5's NextN (MTP) draft rewrite: the excluded draft experts stay bf16."""

from __future__ import annotations

import types

import pytest
from sglang_mx.quant.config import MxFp4ExpertsConfig

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
MX_W = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}
N_LAYERS = 2  # the draft (MTP) layer is model.layers.2 in the checkpoint


def quark_raw(exclude, layer_quant_config=None):
    return {
        "quant_method": "quark",
        "global_quant_config": {"weight": {**MX_W, "is_dynamic": False}, "input_tensors": None},
        "layer_quant_config": layer_quant_config or {},
        "layer_type_quant_config": {},
        "exclude": list(exclude),
    }


def moe_layer(prefix):
    from sglang.srt.layers.moe.fused_moe_triton import FusedMoE

    return FusedMoE(num_experts=4, hidden_size=64, intermediate_size=64, layer_id=1, top_k=2,
                    prefix=prefix)  # fmt: skip


def nextn_rewrite(config):
    """SGLang's own draft-model rewrite of a "quark" config (GlmMoeDsaForCausalLMNextN)."""
    from sglang.srt.models.glm4_moe import GlmMoeDsaForCausalLMNextN as NextN

    hf = types.SimpleNamespace(num_hidden_layers=N_LAYERS)
    return NextN._resolve_nextn_quant_config(NextN, hf, config)


def test_per_expert_excludes_of_the_mtp_layer_leave_draft_experts_bf16(sglang_context):
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    # Quark file2file export: the MTP layer's experts excluded one module at a time.
    names = [f"model.layers.{N_LAYERS}.mlp.experts.{e}.{p}" for e in range(4)
             for p in ("gate_proj", "up_proj", "down_proj")]  # fmt: skip
    config = MxFp4ExpertsConfig.from_config(quark_raw(["re:.*self_attn.*", *names]))
    draft = nextn_rewrite(config)
    assert draft.excluded("model.decoder.mlp.experts")
    assert draft.get_quant_method(moe_layer("model.decoder.mlp.experts"),
                                  "model.decoder.mlp.experts") is None  # fmt: skip
    # The target model keeps its own config: its routed experts are still ours.
    target = config.get_quant_method(moe_layer("model.layers.1.mlp.experts"),
                                     "model.layers.1.mlp.experts")  # fmt: skip
    assert isinstance(target, MxFp4MoEMethod)


def test_layer_pattern_that_is_not_mxfp4_is_refused_naming_the_layer(sglang_context):
    fp8 = {"weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False},
           "input_tensors": None}  # fmt: skip
    config = MxFp4ExpertsConfig.from_config(
        quark_raw(["re:.*self_attn.*"], {"model.layers.1.*": fp8})
    )
    prefix = "model.layers.1.mlp.experts"
    with pytest.raises(NotImplementedError, match=r"model\.layers\.1\.mlp\.experts.*not MXFP4"):
        config.get_quant_method(moe_layer(prefix), prefix)


def test_fused_linear_excluded_only_when_every_part_is(sglang_context):
    from sglang.srt.layers.linear import ReplicatedLinear
    from sglang.srt.layers.quantization.unquant import UnquantizedLinearMethod
    from sglang_mx.quant.linear_method import MxFp4LinearMethod

    base = "model.layers.0.mlp"
    both = [f"{base}.gate_proj", f"{base}.up_proj"]
    config = MxFp4ExpertsConfig.from_config(quark_raw(["re:.*self_attn.*", *both]))
    config.packed_modules_mapping = {"gate_up_proj": ["gate_proj", "up_proj"]}
    linear = ReplicatedLinear(64, 128, bias=False, prefix=f"{base}.gate_up_proj")
    got = config.get_quant_method(linear, f"{base}.gate_up_proj")
    assert isinstance(got, UnquantizedLinearMethod)
    down = ReplicatedLinear(64, 64, bias=False, prefix=f"{base}.down_proj")
    assert isinstance(config.get_quant_method(down, f"{base}.down_proj"), MxFp4LinearMethod)
