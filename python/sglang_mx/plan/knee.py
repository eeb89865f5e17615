"""The knee of a rate sweep as a rate, not a sweep point: where TTFT p95 first crosses the SLO,
interpolated linearly between the two sweep points around the crossing, so a predicted and a
measured sweep over the same rates can be compared to better than the sweep's spacing."""

from __future__ import annotations

import math


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
