"""Calibrate a LinearStepCost from measured batches of a live server: lone requests of a few
prompt lengths (TTFT = frontend + one prefill step) and closed-loop decode batches of a few
sizes (ITL = one decode step), each measured with bench's own runner."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from sglang_mx.bench.workload import WorkloadSpec
from sglang_mx.plan.stepcost import LinearStepCost

PREFILL_LENS = (32, 128, 256)
DECODE_BATCHES = (1, 2, 4)
DECODE_PROMPT, DECODE_OUT = 32, 8


@dataclass
class Calibration:
    cost: LinearStepCost
    frontend_s: float
    prefill_samples: list[tuple[int, float]]  # (prompt tokens, TTFT p50)
    decode_samples: list[tuple[int, float]]  # (batch size, ITL p50)

    def to_dict(self) -> dict:
        return {
            "cost": asdict(self.cost),
            "frontend_s": self.frontend_s,
            "prefill_samples": self.prefill_samples,
            "decode_samples": self.decode_samples,
            "model": "ITL = base + per_decode x batch; TTFT = base + prefill_base + per_token x L",
        }


def prefill_spec(length: int, seed: int) -> WorkloadSpec:
    return WorkloadSpec.fixed(
        f"calibrate-prefill-{length}",
        length,
        2,
        hit_rate=0.0,
        prefix_groups=1,
        num_requests=2,
        arrival="concurrency",
        concurrency=1,
        prime=False,
        seed=seed,
    )


def decode_spec(batch: int, seed: int) -> WorkloadSpec:
    return WorkloadSpec.fixed(
        f"calibrate-decode-{batch}",
        DECODE_PROMPT,
        DECODE_OUT,
        hit_rate=0.0,
        prefix_groups=1,
        num_requests=batch,
        arrival="concurrency",
        concurrency=batch,
        prime=False,
        seed=seed,
    )


def fit(prefill: list[tuple[int, float]], decode: list[tuple[int, float]]) -> Calibration:
    """Least squares: decode ITL on batch size, then prefill TTFT on prompt length. The
    prefill intercept above the decode step's base is charged as a fixed cost of every step
    that prefills (it occupies the server, as measured under CPU contention), not as a free
    frontend delay; frontend_s stays 0."""
    b = np.array([x for x, _ in decode], dtype=float)
    itl = np.array([y for _, y in decode], dtype=float)
    per_decode, base = np.polyfit(b, itl, 1) if len(set(b)) > 1 else (0.0, float(itl.mean()))
    lens = np.array([x for x, _ in prefill], dtype=float)
    ttft = np.array([y for _, y in prefill], dtype=float)
    per_token, intercept = np.polyfit(lens, ttft, 1)
    base = max(float(base), 0.0)
    cost = LinearStepCost(
        base_s=base,
        per_prefill_token_s=max(float(per_token), 0.0),
        per_prefill_key_s=0.0,
        per_decode_s=max(float(per_decode), 0.0),
        per_decode_key_s=0.0,
        prefill_base_s=max(float(intercept) - base, 0.0),
    )
    return Calibration(cost, 0.0, prefill, decode)
