"""Lone requests against a live server and what SGLang's own metrics say they spent there: the
measurements validate_pd_cpu fits the PD handoff and each PD side's speed from.

A server started with --enable-metrics keeps histograms per request stage
(sglang:per_stage_req_latency_seconds{stage=...}: prefill_forward is from the request joining a
forward batch to its prefill result being processed) and, on a PD prefill server, the KV
transfer (sglang:kv_transfer_latency_ms: from the send to the sender seeing success)."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

import httpx
import numpy as np
from sglang_mx.bench.load.prompts import materialize
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.measure.metrics import Slo

from sglang_mx_lab.planner import step_fit
from sglang_mx_lab.planner.record import attributes

_SERIES = re.compile(r"^(sglang:[A-Za-z0-9_]+?)_(sum|count)(?:\{(.*)\})? (\S+)$")
_STAGE = re.compile(r'stage="([^"]+)"')
PREFILL_FORWARD = "sglang:per_stage_req_latency_seconds:prefill_forward"
TRANSFER = "sglang:kv_transfer_latency_ms"


@dataclass
class LoneStats:
    prompt_tokens: int
    ttft_s: list[float] = field(default_factory=list)
    itl_s: list[float] = field(default_factory=list)
    prefill_forward_s: float = math.nan  # mean over these requests, SGLang's own stage
    transfer_s: float = math.nan  # mean KV transfer (PD prefill server only)

    @property
    def ttft_median(self) -> float:
        return float(np.median(self.ttft_s))

    @property
    def itl_median(self) -> float:
        return float(np.median(self.itl_s)) if self.itl_s else math.nan

    def to_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "ttft_median_s": self.ttft_median,
            "itl_median_s": self.itl_median,
        } | attributes(self, "prefill_forward_s", "transfer_s", "ttft_s")


def histogram_totals(text: str) -> dict[str, tuple[float, float]]:
    """{series: (sum, count)} of every sglang histogram in Prometheus text, label sets added;
    per-stage series are keyed `name:stage`."""
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        m = _SERIES.match(line)
        if not m:
            continue
        name, kind, labels, value = m.groups()
        stage = _STAGE.search(labels or "")
        key = f"{name}:{stage.group(1)}" if stage else name
        out.setdefault(key, [0.0, 0.0])[0 if kind == "sum" else 1] += float(value)
    return {k: (v[0], v[1]) for k, v in out.items()}


def _mean_between(before: dict, after: dict, key: str) -> float:
    s0, c0 = before.get(key, (0.0, 0.0))
    s1, c1 = after.get(key, (0.0, 0.0))
    return (s1 - s0) / (c1 - c0) if c1 > c0 else math.nan


def scrape(url: str) -> dict[str, tuple[float, float]]:
    return histogram_totals(httpx.get(url + "/metrics", timeout=30).text)


def flush(*urls: str) -> None:
    """SGLang's /flush_cache on each server (it refuses while requests finish: retried)."""
    for url in urls:
        for _ in range(50):
            if httpx.post(url + "/flush_cache", timeout=30).status_code < 300:
                break
            time.sleep(0.1)


def measure_lone(cfg: RunConfig, tokens, n: int, repeats: int, metrics_url: str) -> LoneStats:
    """`repeats` lone `n`-token prompts (each a fresh token run, one at a time) through
    `cfg.base_url`; the stage means come from `metrics_url` (the server that prefills)."""
    trace = step_fit.lone_trace(f"lone-pd{n}", n, repeats)
    before = scrape(metrics_url)
    run = run_trace(
        trace, materialize(trace, tokens), cfg, tokens, Slo(ttft_p95_s=1e9, ttft_s=None)
    )
    after = scrape(metrics_url)
    ok = [r for r in run.results if r.ok]
    if not ok:
        raise RuntimeError(f"lone {n}-token prompts all failed at {cfg.base_url}")
    return LoneStats(
        n,
        [r.ttft for r in ok],
        [x for r in ok for x in r.itl],
        _mean_between(before, after, PREFILL_FORWARD),
        _mean_between(before, after, TRANSFER) / 1e3,
    )
