"""Request-rate and concurrency sweeps over one workload; the knee (highest load that meets the
whole SLO, TTFT / TPOT / ITL / E2E gates, with every request succeeding) and goodput per point."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sglang_mx.bench.metrics import Slo
from sglang_mx.bench.tracegen import Trace, generate
from sglang_mx.capacity.workload import WorkloadSpec


def sweep_specs(spec: WorkloadSpec, kind: str, values: Sequence[float]) -> list[WorkloadSpec]:
    """One spec per point: the same requests (same seed), only the load changes."""
    if kind == "rate":
        return [spec.with_overrides(arrival="poisson", rate=float(v)) for v in values]
    if kind == "concurrency":
        return [spec.with_overrides(arrival="concurrency", concurrency=int(v)) for v in values]
    raise ValueError(f"sweep kind {kind!r}: use rate or concurrency")


def run_sweep(
    spec: WorkloadSpec,
    kind: str,
    values: Sequence[float],
    run_point: Callable[[Trace], dict],
    slo: Slo | None = None,
) -> dict:
    """`run_point(trace)` runs one trace and returns its summary (see metrics.summarize)."""
    slo = slo or Slo()
    points = []
    for value, point_spec in zip(values, sweep_specs(spec, kind, values), strict=False):
        summary = run_point(generate(point_spec))
        points.append({"x": value, "summary": summary})
    return {"kind": kind, "points": points, "knee": knee(points, slo), "slo": slo.ttft_p95_s}


def knee(points: list[dict], slo: Slo) -> dict | None:
    """Highest-load point with 100% success meeting every gate of `slo` (Slo.judge); None if no
    point qualifies."""
    good = [
        p
        for p in points
        if p["summary"]["errors"] == 0 and all(g["met"] for g in slo.judge(p["summary"]))
    ]
    if not good:
        return None
    best = max(good, key=lambda p: p["x"])
    s = best["summary"]
    return {
        "x": best["x"],
        "output_tok_s": s["output_tok_s"],
        "total_tok_s": s["total_tok_s"],
        "ttft_p95_s": s["ttft_s"]["p95"],
        "goodput_req_s": s["goodput_req_s"],
        "slo": slo.describe(),
    }
