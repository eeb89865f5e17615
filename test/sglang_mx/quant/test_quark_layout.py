"""`sglang-mx quantize --format quark` writes AMD Quark's MXFP4 layout: the quantization_config
SGLang's own QuarkConfig reads, the tensor names, uint8 packing and E8M0 scales SGLang's Quark
dequantizer expects; and a Quark checkpoint we cannot serve is refused by name before loading."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from sgl_kernel_rocm.mx import dequantize_mxfp4, quantize_mxfp4
from sglang_mx.assets import bundled_model_path
from sglang_mx.cli.main import main
from sglang_mx.quant.checkpoint import CheckpointError, validate_checkpoint
from sglang_mx.quant.scheme import parse_scheme

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
LAYERS, EXPERTS = 4, 16  # the bundled GLM-4.5-family model: layer 0 dense, 1-3 MoE


def quantize(src, dst, *extra) -> str:
    assert main(["quantize", str(src), str(dst), "--format", "quark", *extra]) == 0
    return str(dst)


@pytest.fixture(scope="module")
def quark_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("quark")
    bf16 = bundled_model_path("bf16")
    return {
        "full": quantize(bf16, root / "full"),
        "experts": quantize(bf16, root / "experts", "--quark-layout", "experts"),
    }


@pytest.fixture(scope="module")
def glm5_bf16(tmp_path_factory):
    """A random tiny GlmMoeDsaForCausalLM (GLM-5's architecture: MLA + DSA indexer) in bf16."""
    from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM

    config = GlmMoeDsaConfig(
        vocab_size=64, hidden_size=256, intermediate_size=512, moe_intermediate_size=128,
        num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2,
        n_shared_experts=1, num_attention_heads=4, q_lora_rank=128, kv_lora_rank=512,
        qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=64, index_n_heads=4,
        index_head_dim=128, index_topk=128, mlp_layer_types=["dense", "sparse"],
    )  # fmt: skip
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("glm5") / "bf16"
    GlmMoeDsaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    return path


def tensors(path) -> dict[str, torch.Tensor]:
    return load_file(f"{path}/model.safetensors")


def packed_modules(path) -> set[str]:
    return {
        n[: -len(".weight")]
        for n, t in tensors(path).items()
        if n.endswith(".weight") and t.dtype == torch.uint8
    }


def sglang_quantizes(quant_config: dict, module: str) -> bool:
    """SGLang 0.5.23's own QuarkConfig decision for a linear named `module`."""
    from sglang.srt.layers.quantization.quark.quark import QuarkConfig
    from sglang.srt.layers.quantization.quark.utils import should_ignore_layer

    cfg = QuarkConfig.from_config({**quant_config, "packed_modules_mapping": {}, "hf_config": None})
    if should_ignore_layer(module, ignore=cfg.exclude_layers):
        return False
    spec = cfg._find_matched_config(module, torch.nn.Linear(1, 1))
    assert cfg._is_mx_fp4(spec["weight"], spec["input_tensors"]), spec
    return True


@pytest.mark.parametrize("layout", ["full", "experts"])
def test_layout_matches_sglang_quark_config(quark_dirs, layout):
    path = quark_dirs[layout]
    qc = json.loads(open(f"{path}/config.json").read())["quantization_config"]
    scheme = parse_scheme(qc)
    assert (scheme.source, scheme.act_quant) == ("quark", "mxfp4")  # W4A4, as AMD ships it
    packed = packed_modules(path)
    projections = ("gate_proj", "up_proj", "down_proj")
    want = {
        f"model.layers.{i}.mlp.experts.{e}.{p}"
        for i in range(1, LAYERS) for e in range(EXPERTS) for p in projections
    }  # fmt: skip
    if layout == "full":
        want |= {f"model.layers.0.mlp.{p}" for p in projections}
        want |= {
            f"model.layers.{i}.mlp.shared_experts.{p}"
            for i in range(1, LAYERS)
            for p in projections
        }
    assert packed == want
    # Every 2-D weight: packed by us exactly when SGLang's QuarkConfig would quantize it.
    for name, t in tensors(path).items():
        if name.endswith(".weight") and t.dim() == 2 and "embed_tokens" not in name:
            module = name[: -len(".weight")]
            if ".mlp.gate" not in module:
                assert sglang_quantizes(qc, module) == (module in packed), module


def test_tensors_and_packing_match_sglang_quark_dequant(quark_dirs):
    from sglang.srt.layers.quantization.quark.schemes.quark_w4a4_mxfp4 import (
        _dequant_mxfp4_to_bf16,
    )

    src = tensors(bundled_model_path("bf16"))
    dst = tensors(quark_dirs["full"])
    for module in sorted(packed_modules(quark_dirs["full"])):
        w, packed, scale = (
            src[f"{module}.weight"],
            dst[f"{module}.weight"],
            dst[f"{module}.weight_scale"],
        )
        assert packed.dtype == scale.dtype == torch.uint8
        assert packed.shape == (w.shape[0], w.shape[1] // 2)
        assert scale.shape == (w.shape[0], w.shape[1] // 32)
        theirs = _dequant_mxfp4_to_bf16(packed, scale).float()
        assert torch.equal(theirs, dequantize_mxfp4(packed, scale, dtype=torch.float32)), module
        # OCP MX: rounding errs by <= 1 scale unit, saturating (6, 8) to 6 by < 2.
        bound = 2.0 ** (scale.float() - 127).repeat_interleave(32, dim=1) * 2.0
        assert bool(((theirs - w.float()).abs() <= bound + 1e-6).all()), module
    for name, t in src.items():
        if name[: -len(".weight")] not in packed_modules(quark_dirs["full"]):
            assert torch.equal(t, dst[name]), name
    # The even element sits in the low nibble: [0.5, 6.0] at scale 2^0 is byte 0x71.
    packed, scale = quantize_mxfp4(torch.tensor([[0.5, 6.0] + [0.0] * 30]))
    assert (int(packed[0, 0]), int(scale[0, 0])) == (0x71, 127)


def test_glm5_architecture_layout(glm5_bf16, tmp_path):
    path = quantize(glm5_bf16, tmp_path / "glm5-quark")
    qc = json.loads(open(f"{path}/config.json").read())["quantization_config"]
    packed = packed_modules(path)
    names = list(tensors(path))
    assert any(".self_attn.indexer." in n for n in names)  # the DSA indexer exists, kept bf16
    assert {m.rsplit(".", 1)[0] for m in packed} == {
        "model.layers.0.mlp", "model.layers.1.mlp.shared_experts",
        *(f"model.layers.1.mlp.experts.{e}" for e in range(4)),
    }  # fmt: skip
    for name in names:
        if name.endswith(".weight") and "embed_tokens" not in name and ".mlp.gate." not in name:
            module = name[: -len(".weight")]
            if tensors(path)[name].dim() == 2:
                assert sglang_quantizes(qc, module) == (module in packed), module
    validate_checkpoint(path)


def rewrite(src, dst, edit_tensors=None, edit_config=None):
    shutil.copytree(src, dst)
    if edit_tensors:
        t = tensors(dst)
        edit_tensors(t)
        save_file(t, f"{dst}/model.safetensors", metadata={"format": "pt"})
    if edit_config:
        config = json.loads(open(f"{dst}/config.json").read())
        edit_config(config["quantization_config"])
        open(f"{dst}/config.json", "w").write(json.dumps(config))
    return dst


def _shrink(t):
    name = "model.layers.1.mlp.shared_experts.down_proj.weight"
    t[name], t[name + "_scale"] = t[name][:, :32].clone(), t[name + "_scale"][:, :2].clone()


def _drop_scale(t):
    del t["model.layers.0.mlp.gate_proj.weight_scale"]


def _quantize_attention(t):
    name = "model.layers.2.self_attn.o_proj.weight"
    t[name], t[name + "_scale"] = quantize_mxfp4(t[name].float())


def _stop_excluding_attention(qc):
    qc["exclude"].remove("re:.*self_attn.*")


@pytest.mark.parametrize(
    "edit_tensors, edit_config, words",
    [
        (
            _shrink,
            None,
            "tensor model.layers.1.mlp.shared_experts.down_proj.weight has shape [256, 32] but",
        ),
        (
            _drop_scale,
            None,
            "tensor model.layers.0.mlp.gate_proj.weight is packed MXFP4 but its scale tensor "
            "model.layers.0.mlp.gate_proj.weight_scale is missing",
        ),
        (
            _quantize_attention,
            None,
            "tensor model.layers.2.self_attn.o_proj.weight is packed MXFP4 (uint8) but cannot be "
            "served: sglang_mx serves MXFP4 only in MLP projections",
        ),
        (
            None,
            _stop_excluding_attention,
            (
                "config.json: quantization_config quantizes model.layers.0.self_attn.",
                "(it is not in the exclude list), but sglang_mx serves MXFP4 only in MLP",
            ),
        ),
    ],
    ids=["wrong-shape", "missing-scale", "quantized-attention", "config-quantizes-attention"],
)
def test_unservable_quark_checkpoint_names_tensor_and_problem(
    quark_dirs, tmp_path, edit_tensors, edit_config, words
):
    bad = rewrite(quark_dirs["full"], tmp_path / "bad", edit_tensors, edit_config)
    with pytest.raises(CheckpointError) as exc:
        validate_checkpoint(bad)
    for part in (words,) if isinstance(words, str) else words:
        assert part in str(exc.value)
    validate_checkpoint(quark_dirs["full"])  # the unedited checkpoint passes


@pytest.mark.parametrize(
    "edit_tensors, edit_config",
    [(_quantize_attention, None), (None, _stop_excluding_attention)],
    ids=["quantized-attention", "config-quantizes-attention"],
)
def test_gpu_node_leaves_layers_it_does_not_serve_to_sglang(
    quark_dirs, tmp_path, edit_tensors, edit_config
):
    # On a GPU node our method takes only the routed experts: FP8/FP4 attention, an FP4 MTP
    # eh_proj and the like are SGLang's to load (or refuse), so validation lets them through.
    other = rewrite(quark_dirs["full"], tmp_path / "other", edit_tensors, edit_config)
    validate_checkpoint(other, serves_linears=False)
    with pytest.raises(CheckpointError):  # the CPU box serves every layer: refused there
        validate_checkpoint(other, serves_linears=True)


def test_gpu_node_still_checks_routed_experts(quark_dirs, tmp_path):
    def drop_expert_scale(t):
        del t["model.layers.1.mlp.experts.3.down_proj.weight_scale"]

    bad = rewrite(quark_dirs["full"], tmp_path / "bad", drop_expert_scale)
    with pytest.raises(CheckpointError, match="experts.3.down_proj.weight_scale is missing"):
        validate_checkpoint(bad, serves_linears=False)
