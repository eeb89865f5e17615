"""Checkpoints in AMD Quark's file2file layout for a given `quantization_config`, as Quark's
export writes them: one tensor per expert, every linear the config quantizes stored in its scheme
(MXFP4: uint8 `weight` + E8M0 `weight_scale`; FP8 per-channel: float8_e4m3fn `weight` + float32
`weight_scale` [out, 1]), everything else copied. Which linear gets which scheme is decided by
SGLang 0.5.23's own `QuarkConfig` (`should_ignore_layer`, `_find_matched_config`), so a test
built on it checks our loader against SGLang's reading of the same config.

Also the tiny random GLM-5-architecture model with one NextN (MTP) layer the public-config tests
quantize (`tiny_glm5_with_mtp`)."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path
from typing import Any

import torch

# Config keys SGLang reads that transformers' GlmMoeDsaConfig does not write.
SGLANG_KEYS = {
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "moe_layer_freq": 1,
    "indexer_rope_interleave": True,
}


def linear_modules(tensors: dict[str, torch.Tensor]) -> list[str]:
    """Modules with a 2-D weight other than embeddings: the linears a Quark export walks."""
    return sorted(
        n[: -len(".weight")]
        for n, t in tensors.items()
        if n.endswith(".weight") and t.dim() == 2 and not n.endswith("embed_tokens.weight")
    )


def expand_excludes(patterns: list[str], modules: list[str]) -> list[str]:
    """Quark's wildcard `--exclude_layers` patterns as its export lists them: exact names."""
    return [m for m in modules if any(fnmatch.fnmatch(m, p) for p in patterns)]


def sglang_scheme(quant_config: dict[str, Any], module: str) -> dict[str, Any] | None:
    """The weight spec SGLang's QuarkConfig gives `module` (None: excluded or unquantized)."""
    from sglang.srt.layers.quantization.quark.quark import QuarkConfig
    from sglang.srt.layers.quantization.quark.utils import should_ignore_layer

    cfg = QuarkConfig.from_config({**quant_config, "packed_modules_mapping": {}, "hf_config": None})
    if should_ignore_layer(module, ignore=cfg.exclude_layers):
        return None
    return cfg._find_matched_config(module, torch.nn.Linear(1, 1)).get("weight")


def quantize_tensors(
    tensors: dict[str, torch.Tensor], quant_config: dict[str, Any]
) -> dict[str, torch.Tensor]:
    from sgl_kernel_rocm.mx import quantize_mxfp4
    from sglang_mx.quant.scheme import is_mxfp4_weight

    out = dict(tensors)
    for module in linear_modules(tensors):
        spec = sglang_scheme(quant_config, module)
        if not spec:
            continue
        w = tensors[f"{module}.weight"].float()
        if is_mxfp4_weight(spec):
            packed, scale = quantize_mxfp4(w, axis=-1)
        elif spec.get("dtype") == "fp8_e4m3" and spec.get("qscheme") == "per_channel":
            fp8_max = torch.finfo(torch.float8_e4m3fn).max
            scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / fp8_max
            packed = (w / scale).clamp(-fp8_max, fp8_max).to(torch.float8_e4m3fn)
        else:
            raise ValueError(f"{module}: no writer for Quark weight spec {spec}")
        out[f"{module}.weight"] = packed.contiguous()
        out[f"{module}.weight_scale"] = scale.contiguous()
    return out


def write_checkpoint(src: Path, dst: Path, quant_config: dict[str, Any]) -> Path:
    """`src` (a bf16 checkpoint with one model.safetensors) in Quark's layout under `dst`."""
    from safetensors.torch import load_file, save_file

    src, dst = Path(src), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    tensors = quantize_tensors(load_file(str(src / "model.safetensors")), quant_config)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    for f in src.iterdir():
        if f.is_file() and f.name not in ("config.json", "model.safetensors"):
            shutil.copy2(f, dst / f.name)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"] = quant_config
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return dst


def tiny_glm5_with_mtp(dst: Path, tokenizer_from: Path, seed: int = 0) -> Path:
    """A random tiny GlmMoeDsaForCausalLM in bf16: layer 0 dense, layer 1 MoE (4 experts, one
    shared), and layer 2 its NextN (MTP) layer as GLM-5 checkpoints hold it (a MoE decoder layer
    plus `eh_proj`, `enorm`, `hnorm`, `shared_head.norm`); `num_nextn_predict_layers` 1."""
    from safetensors.torch import load_file, save_file
    from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM

    dst = Path(dst)
    layers = 3  # built with the MTP decoder layer as layer 2, then declared as NextN
    config = GlmMoeDsaConfig(
        vocab_size=2048, hidden_size=256, intermediate_size=512, moe_intermediate_size=64,
        num_hidden_layers=layers, first_k_dense_replace=1, n_routed_experts=4,
        num_experts_per_tok=2, n_shared_experts=1, num_attention_heads=4, q_lora_rank=128,
        kv_lora_rank=512, qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=64,
        index_n_heads=4, index_head_dim=128, index_topk=128, n_group=1, topk_group=1,
        indexer_types=["full"] * layers, mlp_layer_types=["dense"] + ["sparse"] * (layers - 1),
        tie_word_embeddings=True, max_position_embeddings=512, eos_token_id=0, pad_token_id=0,
        bos_token_id=None, routed_scaling_factor=2.5,
    )  # fmt: skip
    torch.manual_seed(seed)
    GlmMoeDsaForCausalLM(config).to(torch.bfloat16).save_pretrained(dst)
    tensors = load_file(str(dst / "model.safetensors"))
    hidden = config.hidden_size
    gen = torch.Generator().manual_seed(seed + 1)
    tensors["model.layers.2.eh_proj.weight"] = (
        torch.randn(hidden, 2 * hidden, generator=gen) * 0.02
    ).to(torch.bfloat16)
    for norm in ("enorm", "hnorm", "shared_head.norm"):
        tensors[f"model.layers.2.{norm}.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((dst / "config.json").read_text())
    for key in ("_attn_implementation", "attn_implementation"):
        cfg.pop(key, None)
    cfg.update(SGLANG_KEYS, num_hidden_layers=2, num_nextn_predict_layers=1)
    for key in ("indexer_types", "mlp_layer_types", "layer_types"):
        if isinstance(cfg.get(key), list):
            cfg[key] = cfg[key][:2]
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy2(Path(tokenizer_from) / name, dst / name)
    return dst
