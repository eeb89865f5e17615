"""Public AMD Quark MXFP4 configs, reconstructed at tiny shapes (quark_public/*.json beside
this file, sources in each file and in docs/quark-and-dispatch.md), written as Quark's file2file
export would write a tiny GLM-5 with one NextN (MTP) layer, then read by our CPU loader:

- GLM-5.2-MXFP4 (exact-name excludes, MTP layer bf16 and excluded): loads;
- GLM-5-MXFP4 (shared experts bf16, MTP eh_proj and experts MXFP4): loads, draft included;
- GLM-5.2-Quark-MXFP4-AttnFP8 (FP8 attention in layer_quant_config): refused on the CPU box
  naming the tensor and the reason SGLang itself has (no FP8 Quark scheme without a GPU);
  a GPU node's validation leaves it to SGLang;
- DeepSeek-V3.2 / Kimi style `re:` excludes: loads.

Every linear and the fused experts of the target model and of SGLang's NextN draft (after
SGLang's own `_resolve_nextn_quant_config` rewrite) get MXFP4 methods exactly where the
checkpoint holds uint8 tensors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors import safe_open
from sglang_mx.assets import bundled_model_path
from sglang_mx.quant.checkpoint import CheckpointError, validate_checkpoint
from sglang_mx_lab.testing.quark_file2file import (
    expand_excludes,
    linear_modules,
    tiny_glm5_with_mtp,
    write_checkpoint,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
CONFIGS = sorted(Path(__file__).with_name("quark_public").glob("*.json"))
LAYERS = 2  # checkpoint layer 2 is the MTP layer


def load(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def tiny_bf16(tmp_path_factory):
    return tiny_glm5_with_mtp(
        tmp_path_factory.mktemp("tiny") / "bf16", bundled_model_path("glm5-bf16")
    )


@pytest.fixture(scope="module", params=CONFIGS, ids=[p.stem for p in CONFIGS])
def public(request, tiny_bf16, tmp_path_factory):
    spec = load(request.param)
    path = write_checkpoint(
        tiny_bf16, tmp_path_factory.mktemp(request.param.stem), spec["quantization_config"]
    )
    return spec, path


def dtypes(path: Path) -> dict[str, str]:
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        return {n: str(f.get_slice(n).get_dtype()) for n in f.keys()}


def linears(stored: dict[str, str]) -> list[str]:
    """Linear modules SGLang builds as LinearBase / FusedMoE (routers are not linears)."""
    return sorted(
        n[: -len(".weight")]
        for n in stored
        if n.endswith(("_proj.weight", "_mqa.weight", ".wk.weight", ".wq_b.weight"))
    )


def runtime_name(module: str) -> str:
    """Where SGLang's GLM-5 NextN draft puts a checkpoint module of the MTP layer."""
    from sglang.srt.models.glm4_moe import GlmMoeDsaForCausalLMNextN as NextN

    prefix = f"model.layers.{LAYERS}"
    return NextN._map_mtp_ckpt_name(module, prefix) if module.startswith(prefix + ".") else module


def cpu_configs(spec: dict):
    """Our CPU config for the target model, and for the draft after SGLang's NextN rewrite."""
    import types

    from sglang.srt.models.glm4_moe import GlmMoeDsaForCausalLMNextN as NextN
    from sglang_mx.quant.config import MxFp4ExpertsConfig

    hf = types.SimpleNamespace(num_hidden_layers=LAYERS)
    # SGLang's loader hands the quant config the model's hf_config, as here
    target = MxFp4ExpertsConfig.from_config({**spec["quantization_config"], "hf_config": hf})
    return target, NextN._resolve_nextn_quant_config(NextN, hf, target)


def test_data_files_hold_the_cards_patterns_expanded(tiny_bf16):
    from safetensors.torch import load_file

    modules = linear_modules(load_file(str(tiny_bf16 / "model.safetensors"))) + ["lm_head"]
    assert len(CONFIGS) == 4
    for path in CONFIGS:
        spec = load(path)
        assert spec["sources"] and all(s["url"].startswith("https://") for s in spec["sources"])
        exclude = spec["quantization_config"]["exclude"]
        # file2file lists exact names: each card pattern's matches are in the list, by name
        assert set(expand_excludes(spec["patterns"], modules)) <= set(exclude), path.name


def test_loads_or_is_refused_as_stated(public, sglang_context):
    spec, path = public
    expect = spec["expect"]
    if expect["cpu"] == "refused":
        with pytest.raises(CheckpointError) as exc:
            validate_checkpoint(path)
        for words in expect["words"]:
            assert words in str(exc.value), (words, str(exc.value))
        validate_checkpoint(path, serves_linears=False)  # a GPU node leaves attention to SGLang
        return
    validate_checkpoint(path)
    validate_checkpoint(path, serves_linears=False)


def test_methods_match_the_tensors_target_and_draft(public, sglang_context):
    """Each linear / fused-experts module gets an MXFP4 method iff its tensors are uint8."""
    from sglang.srt.layers.linear import ReplicatedLinear
    from sglang.srt.layers.moe.fused_moe_triton import FusedMoE
    from sglang_mx.quant.linear_method import MxFp4LinearMethod
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    spec, path = public
    stored = dtypes(path)
    target, draft = cpu_configs(spec)
    modules = linears(stored)
    refused = []
    experts_seen = set()
    for module in modules:
        config = draft if module.startswith(f"model.layers.{LAYERS}.") else target
        name = runtime_name(module)
        packed = stored[f"{module}.weight"] == "U8"
        if ".mlp.experts." in module:
            fused = name[: name.index(".mlp.experts.") + len(".mlp.experts")]
            if fused in experts_seen:
                continue
            experts_seen.add(fused)
            layer = FusedMoE(num_experts=4, hidden_size=256, intermediate_size=64, layer_id=1,
                             top_k=2, prefix=fused)  # fmt: skip
            method = config.get_quant_method(layer, fused)
            assert isinstance(method, MxFp4MoEMethod) == packed, (fused, method)
            assert (method is None) == (not packed), (fused, method)
            continue
        linear = ReplicatedLinear(256, 256, bias=False, prefix=name)
        try:
            method = config.get_quant_method(linear, name)
        except NotImplementedError as e:
            refused.append((name, str(e)))
            continue
        assert isinstance(method, MxFp4LinearMethod) == packed, (name, method)
    if spec["expect"]["cpu"] == "refused":
        assert refused and all(".self_attn." in n for n, _ in refused)
        assert all("fp8_e4m3 per_channel, not MXFP4" in msg for _, msg in refused)
    else:
        assert not refused, refused
    assert {"model.layers.1.mlp.experts", "model.decoder.mlp.experts"} == experts_seen


def test_what_each_config_quantizes(public):
    spec, path = public
    stored = dtypes(path)
    u8 = {n[: -len(".weight")] for n, d in stored.items() if n.endswith(".weight") and d == "U8"}
    experts1 = {m for m in u8 if m.startswith("model.layers.1.mlp.experts.")}
    assert len(experts1) == 12  # every config: the target's routed experts are MXFP4
    mtp = {m for m in u8 if m.startswith(f"model.layers.{LAYERS}.")}
    shared = {m for m in u8 if ".shared_experts." in m}
    name = spec["name"]
    if name == "amd/GLM-5.2-MXFP4":
        assert not mtp and len(shared) == 3
    elif name == "amd/GLM-5-MXFP4":
        assert f"model.layers.{LAYERS}.eh_proj" in mtp and len(mtp) == 13 and not shared
    elif name == "amd/GLM-5.2-Quark-MXFP4-AttnFP8":
        fp8 = {n for n, d in stored.items() if d == "F8_E4M3"}
        assert fp8 and all(".self_attn." in n for n in fp8)
        assert not any("weights_proj" in n for n in fp8)  # excluded by name
    else:
        assert not mtp and "model.layers.0.mlp.gate_proj" in u8 and len(shared) == 3
