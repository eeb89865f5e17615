"""Roofline / capacity model: the per-node throughput limit of a model on given hardware, layout,
precision and workload, from prefill compute, decode weight + KV bandwidth and KV capacity.

Deliberately first-order: perfect overlap inside a step, no interconnect or kernel-launch cost,
so a measured / limit ratio says how much the software leaves on the table."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from sglang_mx.capacity.hardware import Hardware
from sglang_mx.capacity.modelspec import ModelSpec
from sglang_mx.capacity.parallel import Layout

DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0}  # bytes per dense weight or KV element


@dataclass(frozen=True)
class Precision:
    expert_bits: float = 4.25  # MXFP4: 4-bit elements + one 8-bit scale per 32
    dense_bytes: float = 2.0  # attention, dense MLPs, shared expert, lm_head (bf16)
    kv_bytes: float = 2.0
    index_bytes: float = 1.0  # DSA indexer keys are FP8
    expert_dtype: str = "fp4"  # compute dtype of expert GEMMs (w4a4 on CDNA4/Blackwell)
    dense_dtype: str = "bf16"
    attn_dtype: str = "bf16"

    @classmethod
    def from_dtypes(
        cls, expert_bits: float, expert: str, dense: str, kv: str, attn: str | None = None
    ) -> Precision:
        """Bytes per dense weight and KV element from their dtype names (DTYPE_BYTES); the
        attention computes in the dense dtype unless `attn` says otherwise."""
        return cls(
            expert_bits=expert_bits,
            dense_bytes=DTYPE_BYTES[dense],
            kv_bytes=DTYPE_BYTES[kv],
            expert_dtype=expert,
            dense_dtype=dense,
            attn_dtype=attn or dense,
        )


@dataclass(frozen=True)
class Workload:
    input_len: int
    output_len: int
    hit_rate: float

    @property
    def new_tokens(self) -> float:
        return (1.0 - self.hit_rate) * self.input_len

    @property
    def footprint(self) -> int:
        """KV tokens one request holds at its end."""
        return self.input_len + self.output_len

    @property
    def mean_decode_context(self) -> float:
        return self.input_len + self.output_len / 2


@dataclass(frozen=True)
class RooflineLimits:
    weight_bytes_per_gpu: float
    kv_tokens_node: float
    max_concurrency: int
    concurrency: int
    prefill_s_per_request: float
    decode_step_s: float
    decode_memory_s: float
    decode_compute_s: float
    decode_tok_s: float
    prefill_bound_req_s: float
    decode_bound_req_s: float
    req_s: float
    output_tok_s: float
    total_tok_s: float
    bound: str

    def to_dict(self) -> dict:
        return asdict(self)


def weight_bytes_per_gpu(m: ModelSpec, layout: Layout, p: Precision) -> float:
    dense = (m.dense_params + m.shared_params + m.lm_head_params) * p.dense_bytes
    embed = 0 if m.tie_embeddings else m.vocab * m.hidden * p.dense_bytes
    return (
        dense + embed
    ) / layout.attn_tp + m.routed_params * p.expert_bits / 8 / layout.moe_shards


def kv_shard(m: ModelSpec, layout: Layout) -> int:
    """MLA keeps one latent per token that every TP rank needs; GQA splits KV heads across TP."""
    return 1 if m.is_mla else max(1, min(layout.attn_tp, m.kv_heads))


def kv_tokens_node(
    m: ModelSpec, hw: Hardware, layout: Layout, p: Precision, reserve: float = 0.10
) -> float:
    free = hw.hbm_bytes * (1.0 - reserve) - weight_bytes_per_gpu(m, layout, p)
    if free <= 0:
        return 0.0
    per_token = m.kv_bytes_per_token(p.kv_bytes, p.index_bytes)
    return free * kv_shard(m, layout) / per_token * layout.dp


def experts_touched(m: ModelSpec, tokens: float) -> float:
    """Expected fraction of routed experts hit by `tokens` tokens with uniform top-k routing."""
    if not m.routed_experts:
        return 0.0
    return 1.0 - (1.0 - m.top_k / m.routed_experts) ** max(tokens, 0.0)


def attn_flops_per_key(m: ModelSpec, absorbed: bool) -> float:
    """FLOPs per (query token, attended key) per layer; decode uses MLA's absorbed form."""
    if m.is_mla and absorbed:
        return 2 * m.heads * (m.kv_values_per_token_layer + m.kv_lora)
    return 2 * m.heads * (m.qk_dim + m.v_dim)


def prefill_seconds(m: ModelSpec, hw: Hardware, layout: Layout, p: Precision, w: Workload) -> float:
    """Node-seconds of compute to prefill the uncached part of one request."""
    n = w.new_tokens
    start = w.input_len - round(n)
    routed = 2 * m.expert_params * m.top_k * m.moe_layers * n
    dense = 2 * (m.dense_params + m.shared_params) * n + 2 * m.lm_head_params
    attn = m.layers * attn_flops_per_key(m, absorbed=False) * m.attended(start, w.input_len)
    causal = (start + 1 + w.input_len) * (w.input_len - start) / 2
    index = m.indexer_layers * 2 * m.index_heads * m.index_dim * causal
    seconds = (
        routed / hw.flops(p.expert_dtype)
        + dense / hw.flops(p.dense_dtype)
        + (attn + index) / hw.flops(p.attn_dtype)
    )
    return seconds / layout.gpus


def decode_step(
    m: ModelSpec, hw: Hardware, layout: Layout, p: Precision, w: Workload, concurrency: float
) -> tuple[float, float]:
    """(memory seconds, compute seconds) of one decode step with `concurrency` sequences."""
    ctx = w.mean_decode_context
    dense_bytes = (m.dense_params + m.shared_params + m.lm_head_params) * p.dense_bytes
    routed_bytes = m.routed_params * p.expert_bits / 8
    touched = experts_touched(m, concurrency / layout.expert_replicas)
    attended = min(ctx, m.index_topk) if m.index_heads else ctx
    kv_seq = m.layers * attended * m.kv_values_per_token_layer * p.kv_bytes
    kv_seq += m.indexer_layers * ctx * m.index_bytes_per_token_layer(p.index_bytes)
    per_gpu = (
        dense_bytes / layout.attn_tp
        + routed_bytes * touched / layout.moe_shards
        + concurrency / layout.dp * kv_seq / kv_shard(m, layout)
    )
    memory_s = per_gpu / hw.hbm_bytes_per_s

    routed = 2 * m.expert_params * m.top_k * m.moe_layers
    dense = 2 * (m.dense_params + m.shared_params + m.lm_head_params)
    attn = m.layers * attn_flops_per_key(m, absorbed=True) * attended
    attn += m.indexer_layers * 2 * m.index_heads * m.index_dim * ctx
    compute_s = (
        concurrency
        * (
            routed / hw.flops(p.expert_dtype)
            + dense / hw.flops(p.dense_dtype)
            + attn / hw.flops(p.attn_dtype)
        )
        / layout.gpus
    )
    return memory_s, compute_s


def limits(
    m: ModelSpec,
    hw: Hardware,
    layout: Layout,
    w: Workload,
    p: Precision | None = None,
    concurrency: int | None = None,
    reserve: float = 0.10,
) -> RooflineLimits:
    """Per-node limit at `concurrency` in-flight requests (default and cap: what the KV fits).

    Prefill and decode share the GPUs: at R req/s, R x prefill_s of each second goes to prefill
    and decode must still emit R x output_len tokens in the rest, so R = D / (L_out + D x t_p)."""
    p = p or Precision()
    kv_tokens = kv_tokens_node(m, hw, layout, p, reserve)
    max_c = int(kv_tokens // w.footprint)
    c = max_c if concurrency is None else min(concurrency, max_c)
    t_p = prefill_seconds(m, hw, layout, p, w)
    if c <= 0:
        mem_s, comp_s, d = math.inf, math.inf, 0.0
    else:
        mem_s, comp_s = decode_step(m, hw, layout, p, w, c)
        d = c / max(mem_s, comp_s)
    r = d / (w.output_len + d * t_p) if d else 0.0
    r_p, r_d = 1.0 / t_p, d / w.output_len
    if max_c <= 0 or c < (concurrency or 0):
        bound = "kv-capacity"
    elif r_p < r_d:
        bound = "prefill-compute"
    else:
        bound = "decode-memory" if mem_s >= comp_s else "decode-compute"
    return RooflineLimits(
        weight_bytes_per_gpu=weight_bytes_per_gpu(m, layout, p),
        kv_tokens_node=kv_tokens,
        max_concurrency=max_c,
        concurrency=c,
        prefill_s_per_request=t_p,
        decode_step_s=max(mem_s, comp_s),
        decode_memory_s=mem_s,
        decode_compute_s=comp_s,
        decode_tok_s=d,
        prefill_bound_req_s=r_p,
        decode_bound_req_s=r_d,
        req_s=r,
        output_tok_s=r * w.output_len,
        total_tok_s=r * (w.input_len + w.output_len),
        bound=bound,
    )
