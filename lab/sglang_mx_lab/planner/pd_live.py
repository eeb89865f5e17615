"""The PD decode side's step cost as it runs under open-loop load, not in closed-loop batches.

Why: closed-loop batches (pd_decode.measure: every row joins at once, then steady decode)
under-state the step a PD decode server takes while requests keep arriving and leaving. On the
2-core CPU box (tiny GLM-5, one core per side, 2026-12-02) the validation sweep's measured ITL
p50 ran 25-40% over the closed-loop fit's simulation from 5.9 req/s up (0.088 vs 0.064 s at
5.88, 0.19 vs 0.12 s at 9.66), and at its top rates the decode side held 40-60 rows, past the
24 the batches measure.

So one more calibration trace: fresh prompts (64 and 448 tokens, alternating; OUT tokens
each) arriving as a Poisson process whose rate steps up through RAMP, given as fractions of the
decode capacity the closed-loop fit implies (1 / (OUT x the step's growth per row)), so the
trace spans light to heavy decode batches on any box. From the client's own token times every
inter-token gap becomes one sample: the rows decoding at its midpoint (requests between their
first and last token) and their context tokens. The samples are binned by rows and

    step = base + per_decode x rows + per_decode_key x context tokens

is fitted to the bins' medians (non-negative least squares, weighted by sqrt(count)/median).
The trace is not the validation sweep's workload (no shared prefix, longer outputs, its own
rates); the sweep's rates stay held out."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from sglang_mx.bench.load.prompts import materialize
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.measure.metrics import RequestResult, Slo
from sglang_mx.measure.tracegen import Trace
from sglang_mx.plan.stepcost import LinearStepCost, Work

from sglang_mx_lab.planner import pd_decode, step_fit

RAMP = ((0.2, 12.0), (0.4, 12.0), (0.6, 12.0), (0.75, 12.0))  # (fraction of capacity, s)
PROMPTS = (64, 448)
OUT = 48
SKIP = 2  # gaps dropped at a request's start: its join into the running batch
BIN_ROWS = 4
MIN_BIN = 20  # samples a bin needs to count


@dataclass(frozen=True)
class LivePoint:
    rows: float  # mean rows decoding over the bin's samples
    context: float  # mean context tokens per row
    itl_s: float  # median gap
    samples: int

    def features(self) -> list[float]:
        return [1.0, self.rows, self.rows * self.context]


def capacity(cost: LinearStepCost, context: float) -> float:
    """Requests/s at which `cost`'s decode step would grow without bound for OUT-token
    requests of `context` tokens (rows = rate x OUT x step)."""
    one = cost([Work(decode=[int(context)])]).seconds
    two = cost([Work(decode=[int(context)] * 2)]).seconds
    return 1.0 / (OUT * max(two - one, 1e-6))


def ramp_trace(cap: float, tag: str = "", seed: int = 0) -> Trace:
    """Poisson arrivals stepping through RAMP's fractions of `cap` req/s."""
    rng = np.random.default_rng(seed)
    name = f"pd-live{tag}"
    reqs, t0 = [], 0.0
    for frac, seconds in RAMP:
        rate, t = frac * cap, t0
        while True:
            t += rng.exponential(1.0 / rate)
            if t >= t0 + seconds:
                break
            i = len(reqs)
            reqs.append(step_fit.trace_request(f"{name}-{i}", PROMPTS[i % 2], OUT, round(t, 4)))
        t0 += seconds
    return Trace(step_fit.trace_spec(name, len(reqs), "poisson", 1), 0, [], reqs)


def samples(results: list[RequestResult], prompt_of: dict[str, int]) -> list[tuple]:
    """(rows, context per row, gap) for every inter-token gap past SKIP of every completed
    request; rows and context from all requests' token times at the gap's midpoint."""
    spans = []  # (request's token times, prompt tokens)
    for r in results:
        if r.ok and r.itl and math.isfinite(r.ttft):
            times = np.cumsum([r.start + r.ttft, *r.itl])
            spans.append((times, prompt_of.get(r.request_id, r.prompt_tokens)))
    if not spans:
        return []
    firsts = np.array([s[0][0] for s in spans])
    lasts = np.array([s[0][-1] for s in spans])
    out = []
    for times, _ in spans:
        for k in range(SKIP, len(times) - 1):
            mid = 0.5 * (times[k] + times[k + 1])
            live = np.nonzero((firsts <= mid) & (lasts > mid))[0]
            if not len(live):
                continue
            ctx = [spans[j][1] + np.searchsorted(spans[j][0], mid) for j in live]
            out.append((len(live), float(np.mean(ctx)), float(times[k + 1] - times[k])))
    return out


def points(rows_ctx_gap: list[tuple]) -> list[LivePoint]:
    bins: dict[int, list[tuple]] = {}
    for s in rows_ctx_gap:
        bins.setdefault(int(s[0]) // BIN_ROWS, []).append(s)
    out = []
    for _, group in sorted(bins.items()):
        if len(group) >= MIN_BIN:
            a = np.array(group)
            out.append(LivePoint(float(a[:, 0].mean()), float(a[:, 1].mean()),
                                 float(np.median(a[:, 2])), len(group)))  # fmt: skip
    return out


def measure(cfg: RunConfig, tokens, flush, cap: float, tag: str = "") -> tuple:
    """(row bins, the ramp trace, its results)."""
    trace = ramp_trace(cap, tag)
    flush()
    run = run_trace(
        trace, materialize(trace, tokens), cfg, tokens, Slo(ttft_p95_s=1e9, ttft_s=None)
    )
    bad = [r.error for r in run.results if not r.ok]
    if len(bad) > len(run.results) // 10:
        raise RuntimeError(f"PD live decode trace: {len(bad)} failed, first: {bad[0]}")
    prompt_of = {r.id: r.input_len for r in trace.requests}
    return points(samples(run.results, prompt_of)), trace, run.results


def fit(pts: list[LivePoint], like: LinearStepCost) -> tuple[LinearStepCost, dict]:
    """`like` with its decode terms fitted to `pts`."""
    if len(pts) < 3:
        raise RuntimeError(f"PD live decode trace: {len(pts)} row bins, 3 needed for the fit")
    cost, fitted = pd_decode.fit_line(pts, np.sqrt([p.samples for p in pts]), like)
    base, per_row, per_key = cost.base_s, cost.per_decode_s, cost.per_decode_key_s
    record = {
        "model": "decode step = base + per_decode x rows + per_decode_key x context tokens, "
        "fitted to the gaps of an open-loop Poisson ramp through the PD router, binned by the "
        f"rows decoding ({BIN_ROWS} a bin)",
        "ramp": [{"fraction_of_capacity": f, "seconds": s} for f, s in RAMP],
        "base_s": float(base),
        "per_decode_s": float(per_row),
        "per_decode_key_s": float(per_key),
        "points": [asdict(p) | {"fitted_s": float(f)} for p, f in zip(pts, fitted, strict=True)],
    }
    return cost, record


# -- the first token's lag, as the ramp's TTFTs show it ---------------------------------------
# The busy-decode arrivals (pd_decode.fit_lag) give a median; the knee is judged on TTFT p95,
# and under open-loop load the PD pair's TTFT tail is longer than a constant lag gives: at
# 2.6-7.7 req/s (2026-12-02 17:59 UTC run) the sweep's TTFT p50 matched a lag of ~0.5 decode
# step and its p95 one of ~2. So the lag may also be drawn per request, exponential with the
# fitted mean; which shape and mean are chosen on the ramp's own TTFT p50 and p95 per segment.
LAG_GRID = {
    "constant": tuple(round(0.1 * i, 1) for i in range(11)),
    "exponential": tuple(round(0.1 * i, 1) for i in range(1, 21)),
}


def segment_ttfts(trace: Trace, results: list[RequestResult]) -> list[dict]:
    """TTFT p50 and p95 of the completed requests arriving in each RAMP segment."""
    arrival = {r.id: r.arrival_s for r in trace.requests}
    out, t0 = [], 0.0
    for frac, seconds in RAMP:
        ttft = [
            r.ttft for r in results if r.ok and t0 <= arrival.get(r.request_id, -1.0) < t0 + seconds
        ]
        if ttft:
            p50, p95 = np.percentile(ttft, [50, 95])
            out.append({"fraction": frac, "n": len(ttft), "p50": float(p50), "p95": float(p95)})
        t0 += seconds
    return out


def fit_tail(build, trace: Trace, measured: list[dict]) -> tuple[float, str, dict]:
    """(lag, shape, record): the `build(lag, shape)` (a PdModel) whose replay of the ramp comes
    closest to its measured segment TTFT p50 and p95 (least squared relative error)."""
    want = {m["fraction"]: m for m in measured}
    rows = []
    for shape, lags in LAG_GRID.items():
        for lag in lags:
            model = build(lag, shape)
            sim = segment_ttfts(trace, model.run(trace).request_results(model.frontend_s))
            err = sum(
                ((s[q] - want[s["fraction"]][q]) / want[s["fraction"]][q]) ** 2
                for s in sim
                if s["fraction"] in want
                for q in ("p50", "p95")
            )
            rows.append({"shape": shape, "lag": lag, "sq_rel_err": err, "simulated": sim})
    best = min(rows, key=lambda r: r["sq_rel_err"])
    record = {
        "model": "first token = KV pickup + lag x the decode step it joins, the lag constant "
        "or an exponential draw per request of that mean; fitted to the ramp's TTFT p50/p95 "
        "per segment",
        "lag_steps": best["lag"],
        "shape": best["shape"],
        "measured": measured,
        "best": best,
        "grid": [{k: v for k, v in r.items() if k != "simulated"} for r in rows],
    }
    return best["lag"], best["shape"], record
