"""The decode side of a PD pair calibrated on that side: closed-loop decode batches sent
through the PD router, each batch's steady inter-token latency one decode step.

Why not the plain server's fit: step_fit.py measures decode at 2-8 rows of ~50-token contexts,
among prefill-heavy observations; a PD decode server under the validation sweep runs 10-30 rows
of ~270-token contexts. Measured here (2-core CPU box, tiny GLM-5, one core per side,
2026-12-02): 24 rows at 448-token prompts stepped in 0.11-0.15 s over five runs; the plain
fit said ~0.09 s.
So the decode side gets its own line, fitted at the batch sizes and contexts it will run:

    step = base + per_decode x rows + per_decode_key x context tokens

(non-negative least squares over batches x prompt lengths, each point weighted by 1/measured).
The batches are their own traces, not the validation sweep's rates or workload."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

import numpy as np
from sglang_mx.bench.load.prompts import materialize
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.measure.metrics import Slo
from sglang_mx.measure.tracegen import Trace
from sglang_mx.plan.stepcost import LinearStepCost

from sglang_mx_lab.planner import step_fit

BATCHES = (1, 8, 16, 24)
PROMPTS = (64, 448)  # prompt + output stay under the tiny model's 512-token context
OUT = 48
SKIP = 8  # ITLs dropped at each end: the join (first token, two steps) and the drain


@dataclass(frozen=True)
class DecodePoint:
    rows: int
    prompt_tokens: int
    itl_s: float  # median steady inter-token latency of the batch

    @property
    def context(self) -> float:
        """Mean context per row over the steady window."""
        return self.prompt_tokens + SKIP + (OUT - 2 * SKIP) / 2

    def features(self) -> list[float]:
        return [1.0, float(self.rows), self.rows * self.context]


def decode_trace(rows: int, prompt: int, tag: str = "") -> Trace:
    """`rows` fresh `prompt`-token requests of OUT tokens, all sent at once (closed loop)."""
    name = f"pd-decode{tag}-{prompt}x{rows}"
    reqs = [step_fit.trace_request(f"{name}-{i}", prompt, OUT, None) for i in range(rows)]
    return Trace(step_fit.trace_spec(name, rows, "concurrency", rows), 0, [], reqs)


def measure(cfg: RunConfig, tokens, flush, tag: str = "") -> list[DecodePoint]:
    """Every (batch, prompt) once through `cfg.base_url`; `flush()` before each."""
    out = []
    for prompt in PROMPTS:
        for rows in BATCHES:
            trace = decode_trace(rows, prompt, tag)
            flush()
            run = run_trace(
                trace, materialize(trace, tokens), cfg, tokens, Slo(ttft_p95_s=1e9, ttft_s=None)
            )
            itl = [x for r in run.results if r.ok for x in r.itl[SKIP:-SKIP]]
            if not itl:
                raise RuntimeError(f"PD decode batch {rows}x{prompt}: no request completed")
            out.append(DecodePoint(rows, prompt, float(np.median(itl))))
    return out


def fit_line(points, weights, like: LinearStepCost) -> tuple[LinearStepCost, np.ndarray]:
    """`like` with its decode terms (base, per_decode, per_decode_key) fitted to `points`
    (each with features() and itl_s; non-negative least squares, each point weighted by its
    weight / measured), and the fitted step at each point."""
    a = np.array([p.features() for p in points], dtype=float)
    y = np.array([p.itl_s for p in points], dtype=float)
    w = np.asarray(weights, dtype=float) / np.maximum(y, 1e-6)
    base, per_row, per_key = step_fit.nonneg_lstsq(a * w[:, None], y * w)
    cost = dataclasses.replace(
        like, base_s=float(base), per_decode_s=float(per_row), per_decode_key_s=float(per_key)
    )
    return cost, a @ np.array([base, per_row, per_key])


def fit(points: list[DecodePoint], like: LinearStepCost) -> tuple[LinearStepCost, dict]:
    """`like` with its decode terms fitted to `points`."""
    cost, fitted = fit_line(points, np.ones(len(points)), like)
    base, per_row, per_key = cost.base_s, cost.per_decode_s, cost.per_decode_key_s
    record = {
        "model": "decode step = base + per_decode x rows + per_decode_key x context tokens, "
        "fitted to closed-loop decode batches through the PD router",
        "base_s": float(base),
        "per_decode_s": float(per_row),
        "per_decode_key_s": float(per_key),
        "points": [
            asdict(p) | {"context": p.context, "fitted_s": float(f)}
            for p, f in zip(points, fitted, strict=True)
        ],
    }
    return cost, record


# -- the first token's lag on a busy decode side ------------------------------------------------
# A request that joins a decoding batch reaches its client later than its KV's arrival and the
# decode loop's next iteration explain: measured here, lone 256-token prompts arriving while 8
# or 24 rows decode waited ~1.4-1.5 decode steps more than on an idle decode server (0.5-1 s
# apart, 2026-12-02), where the loop's own waits account for about one. The extra is fitted as
# `lag` x the step that starts when the request joins, by replaying these traces in the
# simulator.
BUSY_ROWS = (8, 24)
BUSY_ARRIVALS = 6
BUSY_GAP_S = 0.6  # apart enough that the arrivals never queue on each other
BUSY_PROMPT, BUSY_LONG_OUT = 256, 200
# 0 .. 1 decode step: the delivery waits at most for the step that starts as the request joins
# (a 1-token request finishes at that step's end)
LAGS = tuple(round(0.1 * i, 1) for i in range(11))


@dataclass(frozen=True)
class BusyPoint:
    rows: int
    ttft_s: float  # median TTFT of the arrivals


def busy_trace(rows: int, tag: str = "") -> Trace:
    """`rows` long requests at t=0, then BUSY_ARRIVALS fresh prompts, BUSY_GAP_S apart."""
    name = f"pd-busy{tag}-{rows}"
    reqs = [step_fit.trace_request(f"{name}-long{i}", 32, BUSY_LONG_OUT, 0.0) for i in range(rows)]
    reqs += [
        step_fit.trace_request(f"{name}-arrival{i}", BUSY_PROMPT, 2, 0.5 + i * BUSY_GAP_S)
        for i in range(BUSY_ARRIVALS)
    ]
    return Trace(step_fit.trace_spec(name, len(reqs), "poisson", 1), 0, [], reqs)


def _arrival_ttft(results) -> float:
    ttft = [r.ttft for r in results if r.ok and "-arrival" in r.request_id]
    return float(np.median(ttft)) if ttft else float("nan")


def measure_busy(cfg: RunConfig, tokens, flush, tag: str = "") -> list[BusyPoint]:
    out = []
    for rows in BUSY_ROWS:
        trace = busy_trace(rows, tag)
        flush()
        run = run_trace(
            trace, materialize(trace, tokens), cfg, tokens, Slo(ttft_p95_s=1e9, ttft_s=None)
        )
        out.append(BusyPoint(rows, _arrival_ttft(run.results)))
    return out


def fit_lag(build, points: list[BusyPoint]) -> tuple[float, dict]:
    """The lag in LAGS whose model (`build(lag)`, a PdModel) replays the busy traces closest to
    the measured arrival TTFTs (least squared relative error)."""
    rows = []
    for lag in LAGS:
        model = build(lag)
        sim = [
            _arrival_ttft(model.run(busy_trace(p.rows)).request_results(model.frontend_s))
            for p in points
        ]
        err = sum(((s - p.ttft_s) / p.ttft_s) ** 2 for s, p in zip(sim, points, strict=True))
        rows.append({"lag": lag, "simulated_ttft_s": sim, "sq_rel_err": err})
    best = min(rows, key=lambda r: r["sq_rel_err"])
    record = {
        "model": "first token = KV pickup + lag x the decode step that starts as it joins",
        "lag_steps": best["lag"],
        "measured": [asdict(p) for p in points],
        "grid": rows,
    }
    return best["lag"], record
