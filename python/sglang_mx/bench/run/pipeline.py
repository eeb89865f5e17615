"""The measurement pipeline every measuring verb runs (`bench run`, `bench sweep`, `bench
verify`): traces in, typed sweep points out. Each trace is checked against the server's limits
before any prompt is built (a 20k-token trace is refused before it is materialized), its prompts
are built once and checked again as sent, then each point runs (runner.run_trace) and becomes a
SweepPoint whose summary carries its checks (measure/summary.py)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from sglang_mx.bench.load.limits import check_fits
from sglang_mx.bench.load.prompts import SegmentTokens, materialize
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.measure.metrics import Slo
from sglang_mx.measure.sweep import SweepPoint
from sglang_mx.measure.tracegen import Trace


@dataclass(frozen=True)
class Measurement:
    """What measure() returns: a point per run, the runner's warnings in order, and the model
    the endpoint served (as the first point's runner read it)."""

    points: tuple[SweepPoint, ...]
    warnings: tuple[str, ...]
    model: str


def measure(
    runs: Sequence[tuple[float, Trace, str]],
    cfg: RunConfig,
    tokens: SegmentTokens,
    slo: Slo,
) -> Measurement:
    """Run each `(x, trace, label)` against `cfg`'s endpoint (whose `limits` are read already),
    `label` naming the point in the progress line on stderr; the same trace object given twice
    (verify's repeats) is materialized once."""
    traces = list({id(t): t for _, t, _ in runs}.values())
    for trace in traces:  # lengths first: a 20k-token trace is refused before it is built
        check_fits(trace, cfg.limits)
    prompts = {}
    for trace in traces:
        prompts[id(trace)] = ids = materialize(trace, tokens)
        sent = max(max(i) for i in ids.values()) if cfg.send_ids else None
        check_fits(trace, cfg.limits, sent if cfg.api == "completions" else None)
    points, warnings = [], []
    for x, trace, label in runs:
        print(f"== {label}", file=sys.stderr)
        res = run_trace(trace, prompts[id(trace)], cfg, tokens, slo)
        warnings += res.warnings
        points.append(SweepPoint(x, res.summary, res.meta))
    return Measurement(tuple(points), tuple(warnings), points[0].meta["model"])
