"""A plan as typed records: one layout's simulated sweep (LayoutSweep), the best (layout, load) at
the SLA (Best), and the whole plan (Plan), frozen, with one JSON round trip each. plan.json is
`Plan.to_dict()`; its points are bench's SweepPoint and its knee bench's Knee, so a plan and a
measured sweep share their records.

What the simulator adds to a point's summary beyond bench's figures (the cost report, the binding
resource's share and timeline, retractions, steps, the roofline line) rides in the summary's
`extra`, as the runner's additions do; `PlanPoint` reads them by name."""

from __future__ import annotations

import dataclasses
import math

from sglang_mx.measure.sweep import Knee, SweepPoint

# What run_point and plan_sweep add to each summary, in the order they add it.
SIM_EXTRAS = (
    "cost",
    "binding_share",
    "binding_timeline",
    "retractions",
    "steps",
    "roofline_output_tok_s",
)


def _to_json(record) -> dict:
    """A record's fields in order, each nested record (or tuple of them) as its to_dict()."""
    out = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if isinstance(value, tuple):
            value = [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
        elif hasattr(value, "to_dict"):
            value = value.to_dict()
        out[f.name] = value
    return out


def _from_json(cls, d: dict, **nested):
    """cls(**d) with each `nested` field read by its record type's from_dict (a list into a
    tuple of them; None stays None); an unknown or missing key is a TypeError naming it."""
    kwargs = dict(d)
    for name, kind in nested.items():
        value = kwargs.get(name)
        if isinstance(value, list):
            kwargs[name] = tuple(kind.from_dict(v) for v in value)
        elif value is not None:
            kwargs[name] = kind.from_dict(value)
    return cls(**kwargs)


@dataclasses.dataclass(frozen=True)
class PlanPoint:
    """The simulator's additions to one point's summary, read from SweepPoint.summary.extra."""

    cost: dict
    binding_share: dict
    binding_timeline: list
    retractions: int
    steps: int
    roofline_output_tok_s: float = math.nan

    @classmethod
    def of(cls, point: SweepPoint) -> PlanPoint:
        extra = point.summary.extra or {}
        missing = [k for k in SIM_EXTRAS[:-1] if k not in extra]
        if missing:
            raise KeyError(f"sweep point at x={point.x} is not simulated: it lacks {missing}")
        return cls(**{k: extra[k] for k in SIM_EXTRAS if k in extra})

    @property
    def binding(self) -> str | None:
        """The resource that bound the most busy time, None when nothing was busy."""
        share = self.binding_share
        return max(share, key=share.get) if share else None


@dataclasses.dataclass(frozen=True)
class LayoutSweep:
    """One layout swept over rates or concurrencies, as plan_sweep simulates it."""

    layout: str
    kind: str  # "rate" or "concurrency"
    points: tuple[SweepPoint, ...]
    knee: Knee | None
    slo: float  # the TTFT limit (s, at the SLO's percentile) knee_rate is judged at
    roofline: dict
    scheduler: dict
    knee_rate: float  # plan.knee.knee_rate: the interpolated crossing

    def to_dict(self) -> dict:
        return _to_json(self)

    @classmethod
    def from_dict(cls, d: dict) -> LayoutSweep:
        """The inverse of to_dict; an unknown or missing key is a TypeError naming it."""
        return _from_json(cls, d, points=SweepPoint, knee=Knee)


@dataclasses.dataclass(frozen=True)
class Best:
    """The (layout, load) with the most goodput output tok/s among points meeting the SLA."""

    layout: str
    x: float
    goodput_output_tok_s: float
    output_tokens_per_usd: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Best:
        return cls(**d)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan:
    """`sglang-mx plan`'s result: the deployment it simulated, its SLA, workload, one sweep per
    layout and the best point at the SLA. A field added since a committed plan.json was written
    has a default saying so, so that file still reads."""

    stamp: dict
    model: str
    hardware: str
    gpus: int
    efficiency: str
    efficiency_sources: dict
    link: str
    link_source: str
    scaleout: str = "none"
    scaleout_source: str = "not recorded (this plan predates the field)"
    slo: dict  # metrics.Slo as a dict, and its "text" (Slo.describe)
    workload: dict
    sweeps: tuple[LayoutSweep, ...]
    best: Best | None

    def to_dict(self) -> dict:
        return _to_json(self)

    @classmethod
    def from_dict(cls, d: dict) -> Plan:
        return _from_json(cls, d, sweeps=LayoutSweep, best=Best)


def best_at_sla(sweeps: list[LayoutSweep] | tuple[LayoutSweep, ...]) -> Best | None:
    """The Best point over `sweeps`: no failed request, TTFT at the SLO's percentile within each
    sweep's `slo`, and every other gate the SLO sets (--slo-tpot/-itl/-e2e) met."""
    best = None
    for sw in sweeps:
        for p in sw.points:
            s = p.summary
            ttft = getattr(s.ttft_s, f"p{s.slo.get('percentile', 95)}")
            others = all(g["met"] for g in s.slo_gates or () if g["metric"] != "ttft_s")
            if s.errors or ttft > sw.slo or not others:
                continue
            if best is None or s.goodput_output_tok_s > best.goodput_output_tok_s:
                best = Best(
                    layout=sw.layout,
                    x=p.x,
                    goodput_output_tok_s=s.goodput_output_tok_s,
                    output_tokens_per_usd=PlanPoint.of(p).cost["output_tokens_per_usd"],
                )
    return best
