"""The knee of a rate sweep as a rate, not a sweep point: where TTFT p95 first crosses the SLO,
interpolated linearly between the two sweep points around the crossing, so a predicted and a
measured sweep over the same rates can be compared to better than the sweep's spacing."""

from __future__ import annotations

import math
from collections.abc import Callable


def knee_rate(points: list[dict], slo_s: float, metric: str = "p95") -> float:
    """Rate at which TTFT `metric` reaches `slo_s`; the last rate if it never does, NaN if the
    first point already misses it. `points` = [{"x", "summary"}] as bench sweeps write them."""
    pts = sorted(points, key=lambda p: float(p["x"]))

    def ttft(p: dict) -> float:
        s = p["summary"]
        return math.inf if s.get("errors") else s["ttft_s"][metric]

    if not pts or ttft(pts[0]) > slo_s:
        return math.nan
    for a, b in zip(pts, pts[1:], strict=False):
        ya, yb = ttft(a), ttft(b)
        if yb > slo_s:
            xa, xb = float(a["x"]), float(b["x"])
            if math.isinf(yb):
                return xa
            return xa + (slo_s - ya) / (yb - ya) * (xb - xa)
    return float(pts[-1]["x"])


def knee_at(
    predict: Callable[[float], dict], slo_s: float, low_rate: float, step: float = 1.1
) -> float:
    """Knee rate of a predicted sweep against a given SLA: where its TTFT p95 crosses `slo_s`
    on a grid of `step` ratios from `low_rate`, interpolated by knee_rate. `predict(rate)`
    returns one sweep point {"x", "summary"}."""
    points, rate = [], low_rate
    while rate < 1000:
        points.append(predict(rate))
        if points[-1]["summary"]["ttft_s"]["p95"] > slo_s:
            break
        rate *= step
    return knee_rate(points, slo_s)


def search_knee(
    predict: Callable[[float], dict], low_rate: float, slo_factor: float, step: float = 1.1
) -> tuple[float, float]:
    """(knee SLA, knee rate) of a predicted sweep: the SLA is `slo_factor` x the TTFT p50
    `predict` gives at `low_rate` (requests never overlap); the knee as knee_at."""
    slo_s = slo_factor * predict(low_rate)["summary"]["ttft_s"]["p50"]
    return slo_s, knee_at(predict, slo_s, low_rate, step)
