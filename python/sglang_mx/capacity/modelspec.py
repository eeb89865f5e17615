"""Model shapes for the roofline: parameter counts by role and KV bytes per token, from a
Hugging Face config.json (MLA/DSA or GQA attention, dense + MoE MLPs) or the bundled table."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from sglang_mx.capacity.hardware import DATA_DIR

# SGLang 0.5.23 DSATokenToKVPool: index keys quantized in blocks of 128 with one fp32 scale each
INDEX_QUANT_BLOCK = 128
INDEX_SCALE_BYTES = 4


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hidden: int
    layers: int
    dense_layers: int
    intermediate: int
    moe_intermediate: int
    routed_experts: int
    top_k: int
    shared_experts: int
    vocab: int
    tie_embeddings: bool
    heads: int
    # MLA (kv_lora_rank > 0) or GQA (kv_heads * head_dim)
    q_lora: int = 0
    kv_lora: int = 0
    qk_nope: int = 0
    qk_rope: int = 0
    v_head: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    # DSA indexer (0 heads = dense attention)
    index_heads: int = 0
    index_dim: int = 0
    index_topk: int = 0
    index_share_every: int = 1
    # layers that own index keys (SGLang's rule on the config's sharing fields); None: one per
    # index_share_every layers from layer 0
    index_layers: int | None = None

    @property
    def is_mla(self) -> bool:
        return self.kv_lora > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.routed_experts else 0

    @property
    def indexer_layers(self) -> int:
        if not self.index_heads:
            return 0
        if self.index_layers is not None:
            return self.index_layers
        return math.ceil(self.layers / self.index_share_every)

    @property
    def qk_dim(self) -> int:
        return self.qk_nope + self.qk_rope if self.is_mla else self.head_dim

    @property
    def v_dim(self) -> int:
        return self.v_head if self.is_mla else self.head_dim

    @property
    def attn_params_per_layer(self) -> int:
        h = self.hidden
        if self.is_mla:
            q = (
                h * self.q_lora + self.q_lora * self.heads * self.qk_dim
                if self.q_lora
                else (h * self.heads * self.qk_dim)
            )
            kv = h * (self.kv_lora + self.qk_rope) + self.kv_lora * self.heads * (
                self.qk_nope + self.v_head
            )
            return q + kv + self.heads * self.v_head * h
        qo = 2 * h * self.heads * self.head_dim
        return qo + 2 * h * self.kv_heads * self.head_dim

    @property
    def indexer_params(self) -> int:
        q_in = self.q_lora or self.hidden
        per = q_in * self.index_heads * self.index_dim + self.hidden * (
            self.index_dim + self.index_heads
        )
        return per * self.indexer_layers

    @property
    def expert_params(self) -> int:
        """One expert (gate, up, down)."""
        return 3 * self.hidden * self.moe_intermediate

    @property
    def routed_params(self) -> int:
        return self.expert_params * self.routed_experts * self.moe_layers

    @property
    def shared_params(self) -> int:
        return self.expert_params * self.shared_experts * self.moe_layers

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def dense_params(self) -> int:
        """Everything but experts and embeddings: attention, indexer, dense MLPs, routers."""
        dense_mlp = 3 * self.hidden * self.intermediate * (self.layers - self.moe_layers)
        router = self.hidden * self.routed_experts * self.moe_layers
        return self.attn_params_per_layer * self.layers + self.indexer_params + dense_mlp + router

    @property
    def total_params(self) -> int:
        embed = self.vocab * self.hidden
        lm_head = 0 if self.tie_embeddings else self.lm_head_params
        return self.dense_params + self.routed_params + self.shared_params + embed + lm_head

    @property
    def active_linear_params(self) -> int:
        """Weights multiplied per token (embedding lookup excluded, lm_head included)."""
        routed = self.expert_params * self.top_k * self.moe_layers
        return self.dense_params + self.shared_params + routed + self.lm_head_params

    @property
    def kv_values_per_token_layer(self) -> int:
        return self.kv_lora + self.qk_rope if self.is_mla else 2 * self.kv_heads * self.head_dim

    def index_bytes_per_token_layer(self, index_bytes: float = 1.0) -> float:
        """One token's index key in one indexer layer: the key at `index_bytes` per value plus
        an fp32 scale per 128 values, as SGLang 0.5.23 lays out its index-key pages
        (mem_cache/index_key_cache.py: 128 FP8 + 4 B per token at index_head_dim 128)."""
        if not index_bytes:
            return 0.0
        return (
            self.index_dim * index_bytes + self.index_dim // INDEX_QUANT_BLOCK * INDEX_SCALE_BYTES
        )

    def kv_bytes_per_token(self, kv_bytes: float, index_bytes: float = 1.0) -> float:
        """Cache bytes per token per replica: attention KV plus DSA indexer keys. MLA: the
        latent (kv_lora + rope values) at `kv_bytes` in every layer, SGLang's raw row (the HIP
        DSA backends and bf16; CUDA's packed FP8 row, 656 B, is not modelled)."""
        attn = self.layers * self.kv_values_per_token_layer * kv_bytes
        return attn + self.indexer_layers * self.index_bytes_per_token_layer(index_bytes)

    def attended(self, start: int, end: int) -> float:
        """Sum over query positions p in [start, end) of keys attended: min(p+1, topk) under DSA."""
        if end <= start:
            return 0.0
        cap = self.index_topk if self.index_heads else None
        return _sum_min(start + 1, end, cap)


def _sum_min(lo: int, hi: int, cap: int | None) -> float:
    """sum_{n=lo}^{hi} min(n, cap)."""
    if cap is None or hi <= cap:
        return (lo + hi) * (hi - lo + 1) / 2
    if lo > cap:
        return cap * (hi - lo + 1)
    return (lo + cap) * (cap - lo + 1) / 2 + cap * (hi - cap)


def from_hf_config(cfg: dict, name: str = "model") -> ModelSpec:
    """Build a spec from config.json keys (DeepSeek/GLM-MoE/GLM-5 names; Mixtral-style aliases)."""
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    experts = cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts")
    experts = experts or 0
    inter = cfg.get("intermediate_size", 4 * hidden)
    layers = cfg["num_hidden_layers"]
    return ModelSpec(
        name=name,
        hidden=hidden,
        layers=layers,
        dense_layers=cfg.get("first_k_dense_replace", 0) if experts else layers,
        intermediate=inter,
        moe_intermediate=cfg.get("moe_intermediate_size") or inter,
        routed_experts=experts,
        top_k=cfg.get("num_experts_per_tok", 0) if experts else 0,
        shared_experts=cfg.get("n_shared_experts") or 0,
        vocab=cfg["vocab_size"],
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        heads=heads,
        q_lora=cfg.get("q_lora_rank") or 0,
        kv_lora=cfg.get("kv_lora_rank") or 0,
        qk_nope=cfg.get("qk_nope_head_dim", 0),
        qk_rope=cfg.get("qk_rope_head_dim", 0),
        v_head=cfg.get("v_head_dim", 0),
        kv_heads=cfg.get("num_key_value_heads") or heads,
        head_dim=cfg.get("head_dim") or hidden // heads,
        index_heads=cfg.get("index_n_heads", 0),
        index_dim=cfg.get("index_head_dim", 0),
        index_topk=cfg.get("index_topk", 0),
        index_share_every=cfg.get("index_share_every", 1),
        index_layers=index_layer_count(cfg, layers),
    )


_SHARING_KEYS = ("indexer_types", "cli_factor", "index_topk_pattern", "index_topk_freq")


def index_layer_count(cfg: dict, layers: int) -> int | None:
    """Layers that compute (and cache) their own index keys, by the rule SGLang 0.5.23 applies
    to the config (configs/model_config.py dsa_layer_skips_topk; a layer that reuses an earlier
    layer's top-k gets a 0-row index buffer). None when the config has no sharing field."""
    if not any(cfg.get(k) is not None for k in _SHARING_KEYS):
        return None
    return sum(1 for i in range(layers) if not _reuses_topk(cfg, i))


def _reuses_topk(cfg: dict, layer: int) -> bool:
    types = cfg.get("indexer_types")
    if types is not None:
        return layer < len(types) and types[layer] == "shared"
    factor = cfg.get("cli_factor") or 1
    if factor > 1:
        return layer % factor != 0
    pattern = cfg.get("index_topk_pattern")
    if pattern is not None:
        return layer < len(pattern) and pattern[layer] == "S"
    freq = cfg.get("index_topk_freq") or 1
    offset = cfg.get("index_skip_topk_offset")
    shifted = layer - offset + 1 if offset is not None else layer - 1
    return max(shifted, 0) % freq != 0


def load_model(name_or_path: str) -> ModelSpec:
    """A name from data/models.json, a config.json path, or a model directory holding one."""
    table = json.loads((DATA_DIR / "models.json").read_text())
    if name_or_path in table:
        return from_hf_config(table[name_or_path], name=name_or_path)
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        known = ", ".join(k for k in table if not k.startswith("_"))
        raise FileNotFoundError(f"{name_or_path!r} is neither a known model ({known}) nor a config")
    cfg = json.loads(path.read_text())
    cfg = cfg.get("text_config", cfg)
    return from_hf_config(cfg, name=path.parent.name or str(path))
