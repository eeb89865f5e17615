"""Calibrate a LinearStepCost from measured batches of a live server.

One step's cost is base (+ prefill_base when it prefills) + per_request x (prefill pieces +
decode rows) + per_token x (new tokens + decode rows) + per_pair x (attention query-key pairs
computed: extend x seq_len per prefill piece, seq_len per decode row). Each measured quantity is
a sum of such steps plus the frontend latency, laid out as SGLang's overlap loop runs them on a
CPU (scheduler.event_loop_overlap: a step's tokens go out after the next step's forward):

- lone prompt of L tokens (three lengths, sequential): TTFT = front + P(L) + D(1 row);
  ITL p50 = D(1 row);
- closed-loop decode at several batch sizes: ITL p50 = D(b rows);
- batched prefill: a long "blocker" prompt, then k prompts sent while it prefills, so SGLang
  admits the k together in the next prefill batch: blocker TTFT = front + P(blocker) + P(k);
  the k's TTFT + delay = front + P(blocker) + P(k) + D(k + 1 rows).

A non-negative least-squares fit over all of them gives the terms; no term is fitted to the
validation sweep."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from sglang_mx.capacity.workload import WorkloadSpec
from sglang_mx.measure.metrics import RequestResult
from sglang_mx.measure.tracegen import Trace, TraceRequest
from sglang_mx.plan.stepcost import LinearStepCost, Work

LONE_LENS = (64, 192, 320)
LONE_REPEATS = 3
LONE_OUT = 16
DECODE_BATCHES = (2, 4, 8)
DECODE_PROMPT, DECODE_OUT = 32, 32
BLOCKER_LEN, BURST_LEN, BURST_OUT = 320, 64, 2
BURSTS = (4, 8)
BURST_DELAY_S = 0.1  # the blocker prefills for far longer than this on a CPU
TERMS = ("frontend", "base", "prefill_base", "per_request", "per_token", "per_pair")


@dataclass
class Observation:
    name: str
    features: list[float]  # coefficients of TERMS
    measured: float


@dataclass
class Calibration:
    cost: LinearStepCost
    frontend_s: float
    terms: dict[str, float]
    observations: list[Observation]

    def to_dict(self) -> dict:
        return {
            "cost": asdict(self.cost),
            "frontend_s": self.frontend_s,
            "terms": self.terms,
            "observations": [
                asdict(o) | {"fitted": float(np.dot(o.features, list(self.terms.values())))}
                for o in self.observations
            ],
            "model": "step = base + prefill_base [prefill] + per_request x (pieces + decode rows) "
            "+ per_token x (extend + decode rows) + per_pair x (extend x seq_len + decode "
            "context); TTFT adds frontend and, on a CPU, the next step (overlap loop)",
        }


def _step(w: Work) -> np.ndarray:
    """A step's coefficients of TERMS."""
    extend, _keys, rows, ctx, pairs, pieces = LinearStepCost.features(w)
    has_prefill = 1.0 if w.prefill else 0.0
    return np.array([0.0, 1.0, has_prefill, pieces + rows, extend + rows, pairs + ctx])


def prefill(*lens: int) -> np.ndarray:
    return _step(Work(prefill=[(0, n) for n in lens]))


def decode(*ctx: int) -> np.ndarray:
    return _step(Work(decode=list(ctx)))


FRONT = np.array([1.0, 0, 0, 0, 0, 0])


def trace_spec(name: str, n: int, arrival: str = "poisson", concurrency: int = 1) -> WorkloadSpec:
    return WorkloadSpec.fixed(
        name,
        1,
        1,
        hit_rate=0.0,
        prefix_groups=1,
        num_requests=n,
        arrival=arrival,
        concurrency=concurrency,
        prime=False,
    )


def trace_request(rid: str, n: int, out: int, arrival: float | None) -> TraceRequest:
    return TraceRequest(rid, 0, 0, [(f"cal:{rid}", n)], out, 0, arrival)


def lone_trace(name: str, n: int, repeats: int = LONE_REPEATS, out: int = LONE_OUT) -> Trace:
    """`repeats` prompts of `n` tokens (no two share a token run), sent one at a time."""
    reqs = [trace_request(f"{name}-{i}", n, out, None) for i in range(repeats)]
    return Trace(trace_spec(name, len(reqs), "concurrency", 1), 0, [], reqs)


def traces() -> dict[str, Trace]:
    """The calibration batches, each a trace bench's runner replays (and the simulator too)."""
    out = {f"lone{n}": lone_trace(f"lone{n}", n) for n in LONE_LENS}
    for b in DECODE_BATCHES:
        reqs = [trace_request(f"decode{b}-{i}", DECODE_PROMPT, DECODE_OUT, None) for i in range(b)]
        out[f"decode{b}"] = Trace(trace_spec(f"decode{b}", b, "concurrency", b), 0, [], reqs)
    for k in BURSTS:
        reqs = [trace_request(f"burst{k}-blocker", BLOCKER_LEN, BURST_OUT, 0.0)]
        reqs += [
            trace_request(f"burst{k}-{i}", BURST_LEN, BURST_OUT, BURST_DELAY_S) for i in range(k)
        ]
        out[f"burst{k}"] = Trace(trace_spec(f"burst{k}", k + 1), 0, [], reqs)
    return out


def _median(xs: list[float]) -> float:
    return float(np.median(xs)) if xs else float("nan")


def observations(results: dict[str, list[RequestResult]]) -> list[Observation]:
    """Measured (or simulated) results of traces() as linear equations in TERMS."""
    obs = []
    for n in LONE_LENS:
        rs = [r for r in results[f"lone{n}"] if r.ok]
        ttft = _median([r.ttft for r in rs])
        obs.append(Observation(f"lone{n} TTFT", list(FRONT + prefill(n) + decode(n + 1)), ttft))
        itl = _median([x for r in rs for x in r.itl])
        obs.append(Observation(f"lone{n} ITL", list(decode(n + LONE_OUT // 2)), itl))
    for b in DECODE_BATCHES:
        itl = _median([x for r in results[f"decode{b}"] if r.ok for x in r.itl])
        ctx = DECODE_PROMPT + DECODE_OUT // 2
        obs.append(Observation(f"decode{b} ITL", list(decode(*[ctx] * b)), itl))
    for k in BURSTS:
        rs = {r.request_id: r for r in results[f"burst{k}"] if r.ok}
        both = FRONT + prefill(BLOCKER_LEN) + prefill(*[BURST_LEN] * k)
        blocker = rs.get(f"burst{k}-blocker")
        if blocker is not None:
            obs.append(Observation(f"burst{k} blocker TTFT", list(both), blocker.ttft))
        ttft = _median([r.ttft for rid, r in rs.items() if not rid.endswith("blocker")])
        rows = decode(BLOCKER_LEN + 1, *[BURST_LEN + 1] * k)
        obs.append(Observation(f"burst{k} TTFT + delay", list(both + rows), ttft + BURST_DELAY_S))
    return [o for o in obs if np.isfinite(o.measured)]


def nonneg_lstsq(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with every term >= 0: refit without the terms that came out negative
    (a term a measurement cannot support is 0, not a negative time)."""
    keep = np.ones(a.shape[1], dtype=bool)
    while True:
        x = np.zeros(a.shape[1])
        x[keep] = np.linalg.lstsq(a[:, keep], y, rcond=None)[0]
        if (x >= 0).all() or not keep.any():
            return np.maximum(x, 0.0)
        keep &= x > 0


def fit(obs: list[Observation]) -> Calibration:
    """Non-negative least squares of the measured values on TERMS, each equation weighted by
    1 / measured (relative errors: a 1 s TTFT and a 30 ms ITL count alike)."""
    a = np.array([o.features for o in obs], dtype=float)
    y = np.array([o.measured for o in obs], dtype=float)
    w = 1.0 / np.maximum(y, 1e-6)
    x = nonneg_lstsq(a * w[:, None], y * w)
    t = dict(zip(TERMS, (float(v) for v in x), strict=True))
    return Calibration(cost_from_terms(t), t["frontend"], t, obs)


def cost_from_terms(t: dict[str, float]) -> LinearStepCost:
    """The step cost the TERMS describe (a decode row pays per_request + per_token)."""
    return LinearStepCost(
        base_s=t["base"],
        per_prefill_token_s=t["per_token"],
        per_prefill_key_s=0.0,
        per_decode_s=t["per_request"] + t["per_token"],
        per_decode_key_s=t["per_pair"],
        prefill_base_s=t["prefill_base"],
        per_prefill_pair_s=t["per_pair"],
        per_prefill_request_s=t["per_request"],
    )
