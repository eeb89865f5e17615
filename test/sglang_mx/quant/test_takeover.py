"""GPU-node hooks: which of SGLang's Mxfp4Config / QuarkConfig MoE layers our method takes,
with W4A4 vs W4A16 read from each config class, and gpt-oss-style layers left to SGLang."""

from __future__ import annotations

import logging
import pkgutil

import pytest
from sglang_mx.quant import takeover

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
MX_W = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}
PREFIX = "model.layers.1.mlp.experts"


def moe_layer(**features):
    from sglang.srt.layers.moe.fused_moe_triton import FusedMoE

    return FusedMoE(
        num_experts=4, hidden_size=64, intermediate_size=64, layer_id=1, top_k=2,
        prefix=PREFIX, **features,
    )  # fmt: skip


def mxfp4_config(raw):
    from sglang.srt.layers.quantization.mxfp4 import Mxfp4Config

    return takeover.remember_raw_config(Mxfp4Config.from_config.__func__, Mxfp4Config, raw)


def quark_config(input_tensors, exclude=("re:.*self_attn.*", "re:.*mlp\\.gate$")):
    from sglang.srt.layers.quantization.quark.quark import QuarkConfig

    return QuarkConfig.from_config(
        {
            "quant_method": "quark",
            "export": {"kv_cache_group": [], "pack_method": "reorder"},
            "global_quant_config": {
                "weight": {**MX_W, "is_dynamic": False},
                "input_tensors": input_tensors,
                "output_tensors": None,
                "bias": None,
            },
            "layer_quant_config": {},
            "layer_type_quant_config": {},  # Quark writes it; SGLang's matcher reads it
            "exclude": list(exclude),
            "packed_modules_mapping": {},
            "hf_config": None,
        }
    )


def take(config, layer):
    return takeover.take_moe_layer(type(config).get_quant_method, config, layer, PREFIX)


def test_plugin_hooks_resolve_in_this_sglang():
    from sglang.srt.plugins.hook_registry import HookRegistry

    takeover.register()
    targets = [t for t in HookRegistry._hooks if t.startswith("sglang.srt.layers.quantization")]
    assert len(targets) == 3
    for target in targets:
        owner, attr = target.rsplit(".", 1)
        assert hasattr(pkgutil.resolve_name(owner), attr), target


@pytest.mark.parametrize(
    "make, act",
    [
        (lambda: mxfp4_config({"quant_method": "mxfp4", "format": "sglang_mx"}), "none"),
        (
            lambda: mxfp4_config(
                {"quant_method": "mxfp4", "format": "sglang_mx", "act_quant": "mxfp4"}
            ),
            "mxfp4",
        ),
        (lambda: quark_config(None), "none"),
        (lambda: quark_config({**MX_W, "is_dynamic": True}), "mxfp4"),
    ],
    ids=["mxfp4-w4a16", "mxfp4-w4a4", "quark-w4a16", "quark-w4a4"],
)
def test_scheme_read_from_each_config_class(sglang_context, make, act):
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    method = take(make(), moe_layer())
    assert isinstance(method, MxFp4MoEMethod)
    assert method.scheme.act_quant == act


def assert_left_to_sglang(method, caplog, words):
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    assert not isinstance(method, MxFp4MoEMethod)
    lines = [r.getMessage() for r in caplog.records if "stays with SGLang" in r.getMessage()]
    assert len(lines) == 1 and PREFIX in lines[0] and words in lines[0], lines


def test_gpt_oss_checkpoint_stays_with_sglang(sglang_context, caplog):
    from sglang.srt.layers.quantization.mxfp4 import Mxfp4MoEMethod as SglangMxfp4MoE

    caplog.set_level(logging.INFO, logger=takeover.__name__)
    method = take(mxfp4_config({"quant_method": "mxfp4"}), moe_layer())
    assert isinstance(method, SglangMxfp4MoE)
    assert_left_to_sglang(method, caplog, "gpt-oss layout")


@pytest.mark.parametrize(
    "features, words",
    [
        ({"with_bias": True}, "expert biases"),
        ({"gemm1_alpha": 1.702, "gemm1_clamp_limit": 7.0}, "gemm1_alpha=1.702"),
        ({"swiglu_limit": 7.0}, "swiglu_limit=7.0"),
        ({"activation": "gelu"}, "activation 'gelu'"),
    ],
)
def test_layers_with_features_we_lack_stay_with_sglang(sglang_context, caplog, features, words):
    caplog.set_level(logging.INFO, logger=takeover.__name__)
    config = mxfp4_config({"quant_method": "mxfp4", "format": "sglang_mx"})
    assert_left_to_sglang(take(config, moe_layer(**features)), caplog, words)


def test_quark_excluded_experts_stay_with_sglang(sglang_context, caplog):
    caplog.set_level(logging.INFO, logger=takeover.__name__)
    config = quark_config(None, exclude=("re:.*experts.*",))
    assert_left_to_sglang(take(config, moe_layer()), caplog, "excluded")


def test_non_moe_layers_untouched(sglang_context):
    from sglang.srt.layers.linear import ReplicatedLinear

    config = quark_config(None)
    prefix = "model.layers.1.self_attn.o_proj"
    linear = ReplicatedLinear(64, 64, bias=False, prefix=prefix)
    want = type(config).get_quant_method(config, linear, prefix)
    got = takeover.take_moe_layer(type(config).get_quant_method, config, linear, prefix)
    assert type(got) is type(want)


def _declined(config, caplog, words, layer=None):
    """The hook hands the layer back to SGLang's own get_quant_method (a sentinel here, so the
    check does not depend on which method SGLang would build on this CPU box)."""
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    sentinel = object()
    got = takeover.take_moe_layer(lambda *a: sentinel, config, layer or moe_layer(), PREFIX)
    assert got is sentinel and not isinstance(got, MxFp4MoEMethod)
    lines = [r.getMessage() for r in caplog.records if "stays with SGLang" in r.getMessage()]
    assert len(lines) == 1 and words in lines[0], lines


def test_quark_per_expert_exact_name_excludes_reach_the_fused_module(sglang_context, caplog):
    # Quark's file2file export lists excluded experts one tensor module at a time (the MTP
    # layer of amd/GLM-5.2-MXFP4); SGLang maps those names to the fused experts module.
    caplog.set_level(logging.INFO, logger=takeover.__name__)
    names = [f"{PREFIX}.{e}.{p}" for e in range(4) for p in ("gate_proj", "up_proj", "down_proj")]
    _declined(quark_config(None, exclude=names), caplog, "excluded")


def test_quark_excludes_added_by_the_model_are_honoured(sglang_context, caplog):
    # GlmMoeDsaForCausalLMNextN rebuilds QuarkConfig.exclude_layers with its draft experts
    # (remapped names) after the config is built; the raw "exclude" list never shows them.
    caplog.set_level(logging.INFO, logger=takeover.__name__)
    config = quark_config(None)
    config.exclude_layers = [*config.exclude_layers, PREFIX]
    _declined(config, caplog, "excluded")


def _with_layer_config(config, pattern, weight, input_tensors=None):
    config.quant_config["layer_quant_config"] = {
        pattern: {"weight": weight, "input_tensors": input_tensors, "output_tensors": None,
                  "bias": None},
    }  # fmt: skip
    return config


def test_quark_layer_quant_config_that_is_not_mxfp4_stays_with_sglang(sglang_context, caplog):
    caplog.set_level(logging.INFO, logger=takeover.__name__)
    fp8 = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}
    config = _with_layer_config(quark_config(None), "model.layers.1.*", fp8)
    _declined(config, caplog, "is not MXFP4")


def test_quark_layer_quant_config_sets_the_layer_act_quant(sglang_context):
    # The global config is W4A16; a layer pattern (matched as SGLang matches it, fnmatch)
    # makes this layer W4A4. parse_scheme alone reads only patterns naming experts.
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    w4a4 = {**MX_W, "is_dynamic": True}
    config = _with_layer_config(
        quark_config(None), "model.layers.1.*", {**MX_W, "is_dynamic": False}, w4a4
    )
    method = take(config, moe_layer())
    assert isinstance(method, MxFp4MoEMethod) and method.scheme.act_quant == "mxfp4"
    plain = take(quark_config(None), moe_layer())
    assert plain.scheme.act_quant == "none"
