"""The tiny GLM-5-architecture checkpoint the MLA/DSA serving tests run on.

The shipped, trained asset (`tiny-glm5-bf16`, see sglang_mx.assets) when the package has it;
otherwise a random-weight `GlmMoeDsaForCausalLM` of the same agreed shape (notes: hidden 256,
4 layers, MLA 4 heads with latent 512 + rope 64, DSA indexer 4x128 with top-k 128 shared by the
following layer, 16 experts top-4 + 1 shared, routed_scaling_factor 2.5), built by transformers
with the bundled GLM-4.5 tokenizer into a directory the caller owns.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ASSET_NAME = "tiny-glm5-bf16"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")

# Keys SGLang 0.5.23 reads that transformers' GlmMoeDsaConfig does not write (CONTEXT.md s.11).
SGLANG_EXTRA_KEYS = {
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "moe_layer_freq": 1,
    # GLM-5.2 sharing: layer i+1 reuses layer i's top-k. SGLang reads indexer_types first.
    "index_topk_pattern": "FSFS",
    # transformers' GLM-MoE-DSA indexer applies interleaved RoPE; SGLang's Indexer is neox-style
    # (half split) unless the config says otherwise (`not indexer_rope_interleave`).
    "indexer_rope_interleave": True,
}

AGREED_SHAPE = {
    "vocab_size": 2048,
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "first_k_dense_replace": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 128,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 64,
    "v_head_dim": 64,
    "index_n_heads": 4,
    "index_head_dim": 128,
    "index_topk": 128,
    "indexer_types": ["full", "shared", "full", "shared"],
    "n_routed_experts": 16,
    "num_experts_per_tok": 4,
    "n_shared_experts": 1,
    "moe_intermediate_size": 128,
    "intermediate_size": 512,
    "n_group": 1,
    "topk_group": 1,
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
    "max_position_embeddings": 8192,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    "rms_norm_eps": 1e-5,
    "eos_token_id": 0,
    "pad_token_id": 0,
    "bos_token_id": None,
}


def shipped_asset() -> Path | None:
    """The trained asset directory when this checkout ships it, else None."""
    from sglang_mx import assets

    path = Path(assets.__file__).parent / ASSET_NAME
    return path if (path / "config.json").exists() else None


def build_random(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a random-weight bf16 checkpoint of the agreed shape to `out_dir`."""
    import torch
    from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM

    from sglang_mx.assets import bundled_model_path

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = GlmMoeDsaConfig(**AGREED_SHAPE)
    # A wider init than the default 0.02 so the random model's next-token distribution is
    # peaked enough for greedy decoding to be stable under float32 rounding.
    config.initializer_range = 0.08
    model = GlmMoeDsaForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        for layer in model.model.layers:
            if hasattr(layer.mlp, "gate") and hasattr(layer.mlp.gate, "e_score_correction_bias"):
                layer.mlp.gate.e_score_correction_bias.normal_(0.0, 0.1)
    model.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(SGLANG_EXTRA_KEYS)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    tok_src = Path(bundled_model_path("bf16"))
    for name in TOKENIZER_FILES:
        if (tok_src / name).exists():
            shutil.copy(tok_src / name, out / name)
    return out


def checkpoint_dir(tmp_root: str | Path) -> Path:
    """The shipped asset if present, else a random checkpoint built under tmp_root."""
    return shipped_asset() or build_random(Path(tmp_root) / "random-glm5-bf16")
