"""Request-rate and concurrency sweeps over one workload; the knee (highest load that meets the
whole SLO, TTFT / TPOT / ITL / E2E gates, with every request succeeding) and goodput per point.

A point is a SweepPoint, the knee a Knee and the whole a Sweep (frozen, one JSON round trip
each): result.json holds the Sweep's `to_dict()` under "sweep"."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from sglang_mx.capacity.workload import WorkloadSpec
from sglang_mx.measure.metrics import Slo
from sglang_mx.measure.summary import RunSummary
from sglang_mx.measure.tracegen import Trace, generate


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep (a verify run's repeat is one too): its load `x` (rate, concurrency
    or repeat number), the run's summary, and the runner's `meta` (none for a simulated point)."""

    x: float
    summary: RunSummary
    meta: dict | None = None

    def to_dict(self) -> dict:
        out = {"x": self.x, "summary": self.summary.to_dict()}
        return out if self.meta is None else out | {"meta": self.meta}

    @classmethod
    def from_dict(cls, d: dict) -> SweepPoint:
        """The inverse of to_dict; an unknown key is a TypeError naming it."""
        return cls(**{**d, "summary": RunSummary.from_dict(d["summary"])})


@dataclasses.dataclass(frozen=True)
class Knee:
    """The highest-load point meeting the SLO (knee()), with the figures a report states."""

    x: float
    output_tok_s: float
    total_tok_s: float
    ttft_p95_s: float
    goodput_req_s: float
    slo: str | None = None  # Slo.describe() of the SLO it met (older result files lack it)

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict) -> Knee:
        return cls(**d)


def sweep_specs(spec: WorkloadSpec, kind: str, values: Sequence[float]) -> list[WorkloadSpec]:
    """One spec per point: the same requests (same seed), only the load changes."""
    if kind == "rate":
        return [spec.with_overrides(arrival="poisson", rate=float(v)) for v in values]
    if kind == "concurrency":
        return [spec.with_overrides(arrival="concurrency", concurrency=int(v)) for v in values]
    raise ValueError(f"sweep kind {kind!r}: use rate or concurrency")


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The points of a sweep (or of a verify run's repeats: kind "repeat") and their knee at the
    SLO: `slo` its TTFT limit, `slo_text` the whole SLO as Slo.describe() says it (older result
    files lack it)."""

    kind: str
    points: tuple[SweepPoint, ...]
    knee: Knee | None
    slo: float
    slo_text: str | None = None

    def to_dict(self) -> dict:
        knee_d = None if self.knee is None else self.knee.to_dict()
        points = [p.to_dict() for p in self.points]
        out = {"kind": self.kind, "points": points, "knee": knee_d, "slo": self.slo}
        return out if self.slo_text is None else out | {"slo_text": self.slo_text}

    @classmethod
    def from_dict(cls, d: dict) -> Sweep:
        knee_d = d.get("knee")
        return cls(
            **{
                **d,
                "points": tuple(SweepPoint.from_dict(p) for p in d["points"]),
                "knee": None if knee_d is None else Knee.from_dict(knee_d),
            }
        )

    def best(self) -> SweepPoint:
        """The knee's point, else the last: the point a cost or a comparison is stated at."""
        x = self.points[-1].x if self.knee is None else self.knee.x
        return next(p for p in self.points if p.x == x)


def run_sweep(
    spec: WorkloadSpec,
    kind: str,
    values: Sequence[float],
    run_point: Callable[[Trace], RunSummary],
    slo: Slo | None = None,
) -> Sweep:
    """`run_point(trace)` runs one trace and returns its summary (see metrics.summarize)."""
    slo = slo or Slo()
    points = tuple(
        SweepPoint(value, run_point(generate(point_spec)))
        for value, point_spec in zip(values, sweep_specs(spec, kind, values), strict=False)
    )
    return Sweep(kind, points, knee(points, slo), slo.ttft_p95_s)


def knee(points: Sequence[SweepPoint], slo: Slo) -> Knee | None:
    """Highest-load point with 100% success meeting every gate of `slo` (Slo.judge); None if no
    point qualifies."""
    good = [
        p for p in points if p.summary.errors == 0 and all(g["met"] for g in slo.judge(p.summary))
    ]
    if not good:
        return None
    best = max(good, key=lambda p: p.x)
    s = best.summary
    return Knee(
        x=best.x,
        output_tok_s=s.output_tok_s,
        total_tok_s=s.total_tok_s,
        ttft_p95_s=s.ttft_s.p95,
        goodput_req_s=s.goodput_req_s,
        slo=slo.describe(),
    )
