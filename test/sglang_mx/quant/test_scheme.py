"""Parsing the MXFP4 quantization_config layouts (ours and AMD Quark's)."""

from __future__ import annotations

import pytest
from sglang_mx.quant.scheme import MxSchemeError, parse_scheme

MXFP4_W = {
    "dtype": "fp4",
    "qscheme": "per_group",
    "group_size": 32,
    "scale_format": "e8m0",
    "is_dynamic": False,
}
MXFP4_A = {
    "dtype": "fp4",
    "qscheme": "per_group",
    "group_size": 32,
    "scale_format": "e8m0",
    "is_dynamic": True,
}


def quark(input_tensors, exclude=("lm_head", "re:.*self_attn.*", "re:.*mlp.gate$")):
    return {
        "quant_method": "quark",
        "exclude": list(exclude),
        "global_quant_config": {"weight": MXFP4_W, "input_tensors": input_tensors},
    }


def test_ours_defaults_to_w4a16():
    s = parse_scheme({"quant_method": "mxfp4", "format": "sglang_mx"})
    assert (s.source, s.act_quant, s.quantizes_linear) == ("mxfp4", "none", False)


def test_quark_w4a4_and_w4a16():
    assert parse_scheme(quark(MXFP4_A)).act_quant == "mxfp4"
    s = parse_scheme(quark(None))
    assert s.act_quant == "none" and s.quantizes_linear
    assert s.is_excluded("model.layers.3.self_attn.qkv_proj")
    assert s.is_excluded("lm_head")
    assert not s.is_excluded("model.layers.3.mlp.shared_experts.gate_up_proj")


@pytest.mark.parametrize(
    "config, words",
    [
        ({"quant_method": "fp8"}, "not an MXFP4 layout"),
        ({"quant_method": "mxfp4", "act_quant": "int8"}, "act_quant"),
        ({"quant_method": "mxfp4", "block_size": 16}, "block_size"),
        (
            {
                "quant_method": "quark",
                "global_quant_config": {"weight": {**MXFP4_W, "group_size": 16}},
            },
            "not MXFP4",
        ),
        (quark({**MXFP4_A, "dtype": "fp8_e4m3"}), "input_tensors"),
    ],
)
def test_bad_configs_name_the_problem(config, words):
    with pytest.raises(MxSchemeError, match=words):
        parse_scheme(config)
