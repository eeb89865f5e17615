"""Plan one deployment: build the engines and step cost for a model / hardware / layout, run a
trace through the simulator, and summarize it with the same code `sglang-mx bench` uses
(metrics.summarize, sweep.knee, cost.cost_report), beside the roofline limit."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from sglang_mx.capacity.cost import cost_report
from sglang_mx.capacity.hardware import Hardware
from sglang_mx.capacity.modelspec import ModelSpec
from sglang_mx.capacity.roofline import Precision, Workload, kv_tokens_node, limits
from sglang_mx.capacity.workload import WorkloadSpec
from sglang_mx.measure.metrics import Slo, summarize
from sglang_mx.measure.summary import RunSummary
from sglang_mx.measure.sweep import SweepPoint, knee, sweep_specs
from sglang_mx.measure.tracegen import Trace, generate
from sglang_mx.plan.efficiency import Efficiency
from sglang_mx.plan.knee import knee_rate
from sglang_mx.plan.layouts import PlanLayout
from sglang_mx.plan.links import Link
from sglang_mx.plan.records import LayoutSweep
from sglang_mx.plan.scheduler_config import SchedulerConfig
from sglang_mx.plan.sim import Group, SimResult, build_groups, simulate
from sglang_mx.plan.stepcost import RooflineStepCost, Speculative


@dataclass(frozen=True)
class Deployment:
    model: ModelSpec
    hw: Hardware
    layout: PlanLayout
    precision: Precision = Precision()
    eff: Efficiency | None = None
    link: Link | None = None
    sched: dict = field(default_factory=dict)  # SchedulerConfig overrides
    spec: Speculative = Speculative()
    reserve: float = 0.10  # HBM share kept for activations, as the roofline
    scaleout: Link | None = None  # the per-GPU RDMA NIC PD moves KV over (links.scaleout_for)

    def scheduler(self, side: PlanLayout | None = None) -> SchedulerConfig:
        """SGLang's defaults for this GPU (srt/arg_groups/memory_hook.py: chunked prefill 16k and
        graph max bs 512 at >= 160 GB, else 8k and 256/512), divided per DP-attention rank as
        parallel_hook does (chunked prefill // dp, schedule_conservativeness x 0.3)."""
        lay = side or self.layout
        ranks = lay.ranks
        big = self.hw.hbm_gb * 1e9 / 2**20 >= 160 * 1024  # SGLang compares MiB
        chunk = self.sched.get("chunked_prefill_size", 16384 if big else 8192)
        if chunk and ranks > 1:
            chunk //= ranks
        kv = int(kv_tokens_node(self.model, self.hw, lay.node, self.precision, self.reserve))
        kv_rank = kv // lay.node.dp
        base = SchedulerConfig(
            max_total_tokens=max(kv_rank, 1),
            max_running_requests=max(1, self.sched.get("max_running_requests", 2048) // ranks),
            chunked_prefill_size=chunk or None,
            cuda_graph_max_bs=512 if big or lay.engine.gpus >= 4 else 256,
            schedule_conservativeness=0.3 if ranks > 1 else 1.0,
        )
        over = {
            k: v
            for k, v in self.sched.items()
            if k not in ("chunked_prefill_size", "max_running_requests")
        }
        return base.with_overrides(**over)

    def cost(self, side: PlanLayout | None = None) -> RooflineStepCost:
        lay = side or self.layout
        cfg = self.scheduler(side)
        return RooflineStepCost(
            self.model,
            self.hw,
            lay.engine,
            self.precision,
            self.eff,
            self.link,
            moe_a2a=lay.moe_a2a,
            cuda_graph=cfg.cuda_graph,
            cuda_graph_max_bs=cfg.cuda_graph_max_bs,
            overlap_schedule=cfg.overlap_schedule,
            spec=self.spec,
        )

    def groups(self) -> list[Group]:
        emitted = self.spec.emitted
        if not self.layout.is_pd:
            lay = self.layout
            return build_groups(self.scheduler(), self.cost(), lay.ranks, lay.replicas, emitted)
        out = []
        for side, role in ((self.layout.prefill, "prefill"), (self.layout.decode, "decode")):
            out += build_groups(
                self.scheduler(side), self.cost(side), side.ranks, side.replicas, emitted, role
            )
        return out

    @property
    def handoff_link(self) -> Link | None:
        """PD: SGLang's transfer backends (mooncake over RDMA, mori) move KV through the NICs,
        also between two engines on one node; the scale-up link only when no NIC is known."""
        return self.scaleout or self.link

    def handoff_s(self, r) -> float:
        """PD: the whole prompt's KV (decode keeps no radix cache by default: SGLang's
        --disaggregation-decode-enable-radix-cache is off) crosses one GPU's NIC once. With
        MLA every decode attention-TP rank pulls a full copy from its own prefill rank, each
        pair over its own NIC, so a request takes bytes / one NIC whatever the TP size."""
        link = self.handoff_link
        return link.latency_s + self.handoff_serial_s(r) if link else 0.0

    def handoff_serial_s(self, r) -> float:
        """The part of the handoff that holds the NIC pair: its bytes at the NIC's rate."""
        link = self.handoff_link
        if link is None:
            return 0.0
        nbytes = r.input_len * self.model.kv_bytes_per_token(
            self.precision.kv_bytes, self.precision.index_bytes
        )
        return nbytes / link.bytes_per_s

    def roofline(self, spec: WorkloadSpec) -> dict:
        w = Workload(round(spec.input_len.mean), round(spec.output_len.mean), spec.hit_rate)
        lim = limits(self.model, self.hw, self.layout.node, w, self.precision, None, self.reserve)
        # speculative decoding emits (1 + accepted) tokens per step: the limit line scales too
        scale = self.spec.emitted
        return {
            "output_tok_s": lim.output_tok_s * scale,
            "total_tok_s": lim.total_tok_s * scale,
            "req_s": lim.req_s * scale,
            "bound": lim.bound,
            "max_concurrency": lim.max_concurrency,
        }


def run_point(dep: Deployment, trace: Trace, slo: Slo) -> tuple[RunSummary, SimResult]:
    pd = dep.layout.is_pd
    res = simulate(
        trace,
        dep.groups(),
        handoff_s=dep.handoff_s if pd else None,
        handoff_serial_s=dep.handoff_serial_s if pd else None,
    )
    summary = summarize(res.request_results(), slo)
    gpus = dep.layout.gpus
    nodes = max(1, math.ceil(gpus / dep.hw.gpus_per_node))
    extra = {
        "cost": cost_report(summary, dep.hw.price_per_gpu_hour, gpus, nodes),
        "binding_share": res.binding_share(),
        "binding_timeline": res.binding_timeline(),
        "retractions": res.retractions,
        "steps": len(res.steps),
    }
    return dataclasses.replace(summary, extra=extra), res


def plan_sweep(
    dep: Deployment, spec: WorkloadSpec, kind: str, values: list[float], slo: Slo
) -> LayoutSweep:
    """Sweep one layout over rates (or concurrencies); knee as bench's sweep.knee, knee_rate as
    plan.knee's interpolated crossing of the SLA's TTFT p95."""
    roof = dep.roofline(spec)
    records = []
    for value, point_spec in zip(values, sweep_specs(spec, kind, values), strict=True):
        summary, _ = run_point(dep, generate(point_spec), slo)
        extra = summary.extra | {"roofline_output_tok_s": roof["output_tok_s"]}
        records.append(SweepPoint(value, dataclasses.replace(summary, extra=extra)))
    points = [p.to_dict() for p in records]  # knee_rate reads the JSON form (lab's too)
    return LayoutSweep(
        layout=dep.layout.name,
        kind=kind,
        points=tuple(records),
        knee=knee(records, slo),
        slo=slo.ttft_p95_s,
        roofline=roof,
        scheduler=dep.scheduler().to_dict(),
        knee_rate=knee_rate(points, slo.ttft_p95_s, f"p{slo.percentile}"),
    )
