"""Cost of one scheduler step (a forward pass over a batch), split by resource.

`RooflineStepCost` charges the roofline's own terms (capacity/roofline.py: weight bytes, KV bytes,
FLOPs) divided by kernel efficiency, plus interconnect collectives (links.py) and CPU scheduler /
launch overhead; with the 'ideal' profile and no interconnect it is the roofline step itself.
`LinearStepCost` is a per-term linear fit, calibrated from measured batches of a live server."""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_mx.capacity.hardware import Hardware
from sglang_mx.capacity.modelspec import ModelSpec
from sglang_mx.capacity.parallel import Layout
from sglang_mx.capacity.roofline import Precision, attn_flops_per_key, experts_touched, kv_shard
from sglang_mx.plan.efficiency import Efficiency
from sglang_mx.plan.links import Link, all_gather_s, all_reduce_s, all_to_all_s

ACT_BYTES = 2.0  # bf16 activations on the wire
RESOURCES = ("compute", "hbm", "interconnect", "scheduler", "kernel-latency")


@dataclass
class Work:
    """One rank's batch: prefill pieces (start position, tokens) and decode context lengths."""

    prefill: list[tuple[int, int]] = field(default_factory=list)
    decode: list[int] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.prefill) + len(self.decode)

    @property
    def decode_only(self) -> bool:
        return not self.prefill


@dataclass(frozen=True)
class StepTerms:
    seconds: float
    compute_s: float = 0.0
    hbm_s: float = 0.0
    interconnect_s: float = 0.0
    scheduler_s: float = 0.0
    kernel_latency_s: float = 0.0  # the small-batch floor, when it exceeds compute and HBM

    @property
    def binding(self) -> str:
        values = (
            self.compute_s,
            self.hbm_s,
            self.interconnect_s,
            self.scheduler_s,
            self.kernel_latency_s,
        )
        terms = dict(zip(RESOURCES, values, strict=True))
        return max(terms, key=terms.get)


@dataclass(frozen=True)
class Speculative:
    """MTP / EAGLE: each decode step verifies 1 + draft tokens per request and keeps
    1 + accepted of them on average."""

    draft: int = 0
    accepted: float = 0.0

    @property
    def emitted(self) -> float:
        return 1.0 + self.accepted


@dataclass(frozen=True)
class RooflineStepCost:
    model: ModelSpec
    hw: Hardware
    layout: Layout  # one engine: gpus = attn_tp x dp-attention ranks, experts over all gpus
    precision: Precision
    eff: Efficiency
    link: Link | None = None  # None: no interconnect charge (the roofline's assumption)
    moe_a2a: bool = False  # EP with all-to-all dispatch/combine instead of gather/all-reduce
    cuda_graph: bool = True
    cuda_graph_max_bs: int = 256
    overlap_schedule: bool = True
    spec: Speculative = Speculative()

    # -- the roofline's terms, per rank and per step -------------------------------------------
    def _attention(self, w: Work) -> tuple[float, float, int]:
        """(FLOPs, KV bytes, tokens) of one rank's attention + indexer."""
        m, p = self.model, self.precision
        q = 1 + self.spec.draft
        flops = kv = 0.0
        tokens = 0
        for start, n in w.prefill:
            end = start + n
            flops += m.layers * attn_flops_per_key(m, absorbed=False) * m.attended(start, end)
            causal = (start + 1 + end) * n / 2
            flops += m.indexer_layers * 2 * m.index_heads * m.index_dim * causal
            kv += m.layers * end * m.kv_values_per_token_layer * p.kv_bytes
            kv += m.indexer_layers * end * m.index_bytes_per_token_layer(p.index_bytes)
            tokens += n
        for ctx in w.decode:
            attended = min(ctx, m.index_topk) if m.index_heads else ctx
            flops += q * m.layers * attn_flops_per_key(m, absorbed=True) * attended
            flops += q * m.indexer_layers * 2 * m.index_heads * m.index_dim * ctx
            kv += m.layers * attended * m.kv_values_per_token_layer * p.kv_bytes
            kv += m.indexer_layers * ctx * m.index_bytes_per_token_layer(p.index_bytes)
            tokens += q
        return flops, kv, tokens

    def __call__(self, works: list[Work]) -> StepTerms:
        m, hw, lay, p, e = self.model, self.hw, self.layout, self.precision, self.eff
        per_rank = [self._attention(w) for w in works]
        tokens = sum(t for _, _, t in per_rank)
        if tokens == 0:
            return StepTerms(0.0)
        logits = sum(len(w.prefill) + len(w.decode) * (1 + self.spec.draft) for w in works)
        attn_flops = max(f for f, _, _ in per_rank) / lay.attn_tp
        kv_bytes = max(k for _, k, _ in per_rank) / kv_shard(m, lay)
        routed = 2 * m.expert_params * m.top_k * m.moe_layers * tokens
        dense = 2 * (m.dense_params + m.shared_params) * tokens + 2 * m.lm_head_params * logits
        compute_s = (
            routed / hw.flops(p.expert_dtype) / lay.gpus
            + dense / hw.flops(p.dense_dtype) / lay.gpus
            + attn_flops / hw.flops(p.attn_dtype)
        ) / e.compute
        dense_w = (m.dense_params + m.shared_params + m.lm_head_params) * p.dense_bytes
        routed_w = (
            m.routed_params * p.expert_bits / 8 * experts_touched(m, tokens / lay.expert_replicas)
        )
        hbm_s = (
            dense_w / lay.attn_tp / e.dense_mem
            + routed_w / lay.moe_shards / e.moe_mem
            + kv_bytes / e.attn_mem
        ) / hw.hbm_bytes_per_s
        comm_s = self.comm_seconds(max(t for _, _, t in per_rank), tokens)
        requests = sum(w.requests for w in works)
        decode_only = all(w.decode_only for w in works)
        graph = self.cuda_graph and decode_only and requests <= self.cuda_graph_max_bs
        launch_s = (e.launch_graph_us if graph else e.launch_eager_us_per_layer * m.layers) * 1e-6
        cpu_s = (e.sched_base_us + e.sched_per_req_us * requests) * 1e-6
        floor_s = e.kernel_floor_us_per_layer * m.layers * 1e-6
        gpu_s = max(compute_s, hbm_s, floor_s) + comm_s + launch_s
        seconds = max(gpu_s, cpu_s) if self.overlap_schedule else gpu_s + cpu_s
        latency_s = floor_s if floor_s > max(compute_s, hbm_s) else 0.0
        return StepTerms(seconds, compute_s, hbm_s, comm_s, launch_s + cpu_s, latency_s)

    # -- interconnect --------------------------------------------------------------------------
    def comm_seconds(self, rank_tokens: float, tokens: float) -> float:
        """Collectives of one step: TP all-reduce after attention within each attention group;
        then per MLP layer either an all-reduce (plain TP), a DP-attention gather + scatter
        (attention groups smaller than the engine), or EP all-to-all dispatch + combine."""
        if self.link is None:
            return 0.0
        m, lay, link = self.model, self.layout, self.link
        h = m.hidden * ACT_BYTES
        total = all_reduce_s(rank_tokens * h, lay.attn_tp, link) * m.layers
        dpattn = lay.dp > 1
        mlp_ar = 0.0
        if dpattn:
            gather = all_gather_s(tokens * h, lay.gpus, link)
            mlp_ar = 2 * gather
        else:
            mlp_ar = all_reduce_s(rank_tokens * h, lay.gpus, link)
        if self.moe_a2a and m.moe_layers:
            per_gpu = tokens / lay.gpus * m.top_k * h
            a2a = 2 * all_to_all_s(per_gpu, lay.gpus, link)
            total += a2a * m.moe_layers + mlp_ar * (m.layers - m.moe_layers)
        else:
            total += mlp_ar * m.layers
        return total


@dataclass(frozen=True)
class LinearStepCost:
    """seconds = base (+ prefill_base when the step prefills) + per_prefill_token x extend
    + per_prefill_key x causal prefill keys + per_prefill_pair x extend x seq_len
    + per_prefill_request x prefill pieces + per_decode x decode seqs
    + per_decode_key x decode context; fitted by calibrate.py.

    `per_prefill_pair` is for an attention that scores every new token against every key of
    its request and masks afterwards (sglang_mx's CPU torch path, attention/dsa/sparse_math.py: the
    [extend, seq_len] rectangle), `per_prefill_key` for one that skips the masked half."""

    base_s: float
    per_prefill_token_s: float
    per_prefill_key_s: float
    per_decode_s: float
    per_decode_key_s: float
    prefill_base_s: float = 0.0  # extra fixed cost of a step that prefills
    spec: Speculative = Speculative()
    per_prefill_pair_s: float = 0.0
    per_prefill_request_s: float = 0.0  # per prefill piece (per-request loops over layers)

    @staticmethod
    def features(w: Work) -> tuple[float, ...]:
        """(extend tokens, causal keys, decode seqs, decode context, pairs, prefill pieces)."""
        keys = sum((2 * s + n + 1) * n / 2 for s, n in w.prefill)
        return (
            float(sum(n for _, n in w.prefill)),
            keys,
            float(len(w.decode)),
            float(sum(w.decode)),
            float(sum(n * (s + n) for s, n in w.prefill)),
            float(len(w.prefill)),
        )

    def __call__(self, works: list[Work]) -> StepTerms:
        if not any(w.requests for w in works):
            return StepTerms(0.0)
        rank = []
        for w in works:
            f = self.features(w)
            rank.append(
                self.per_prefill_token_s * f[0]
                + self.per_prefill_key_s * f[1]
                + self.per_decode_s * f[2]
                + self.per_decode_key_s * f[3]
                + self.per_prefill_pair_s * f[4]
                + self.per_prefill_request_s * f[5]
            )
        work = max(rank) + (self.prefill_base_s if any(w.prefill for w in works) else 0.0)
        return StepTerms(self.base_s + work, compute_s=work, scheduler_s=self.base_s)
