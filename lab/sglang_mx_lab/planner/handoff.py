"""The PD KV handoff fitted from measured lone requests: seconds = latency + prompt tokens x
per-token seconds, the per-token term read as bytes per token / bytes per second of the
transfer.

A lone request's handoff is its TTFT through PD minus its TTFT on a plain server with the same
step cost, corrected for where each sends the first token: the plain server on a CPU sends it
one forward late (SGLang's overlap loop processes a step's result after the next forward, here
the request's first decode step), while through PD the decode server streams it as soon as the
KV has arrived. The latency term also holds everything else PD adds to one request: the
router's hop, the bootstrap handshake, the transfer engine's own setup.

The serial part is what one transfer lane does at a time (the simulator queues requests on it):
fitted from the prefill server's own transfer latency (sglang:kv_transfer_latency_ms, from the
send to the sender seeing success) when it reports one, else the whole handoff."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from sglang_mx_lab.planner.record import attributes

# What to_dict writes of a Handoff as it is, before its samples.
PLAIN_ATTRIBUTES = ("latency_s", "per_token_s", "bytes_per_token", "bytes_per_s",
                    "serial_latency_s", "serial_per_token_s")  # fmt: skip


@dataclass(frozen=True)
class HandoffSample:
    prompt_tokens: int
    pd_ttft_s: float  # median over the repeats, through the PD router
    plain_ttft_s: float  # median over the repeats, on the plain server
    plain_lag_s: float  # the plain server's first decode step, inside its TTFT on a CPU

    @property
    def handoff_s(self) -> float:
        return self.pd_ttft_s - (self.plain_ttft_s - self.plain_lag_s)


@dataclass(frozen=True)
class Handoff:
    latency_s: float
    per_token_s: float
    bytes_per_token: float  # KV + index keys one prompt token ships (ModelSpec)
    serial_latency_s: float = 0.0
    serial_per_token_s: float = 0.0
    samples: list[HandoffSample] = field(default_factory=list)
    transfer_samples: list[tuple[int, float]] = field(default_factory=list)  # (tokens, s)

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_per_token / self.per_token_s if self.per_token_s > 0 else math.inf

    def __call__(self, r) -> float:
        """simulate()'s handoff_s: seconds from the prefill result to the KV at decode."""
        return self.latency_s + r.input_len * self.per_token_s

    def serial_s(self, r) -> float:
        """simulate()'s handoff_serial_s: the part that holds the transfer lane."""
        return min(self(r), self.serial_latency_s + r.input_len * self.serial_per_token_s)

    def to_dict(self) -> dict:
        return attributes(self, *PLAIN_ATTRIBUTES) | {
            "samples": [asdict(s) | {"handoff_s": s.handoff_s} for s in self.samples],
            "transfer_samples": [list(t) for t in self.transfer_samples],
            "model": "handoff = latency + prompt tokens x per_token; per sample: PD TTFT - "
            "(plain TTFT - plain first decode step); serial (one lane, FIFO) = serial_latency "
            "+ prompt tokens x serial_per_token, from the prefill server's transfer latency",
        }


def fit_handoff(
    samples: list[HandoffSample],
    bytes_per_token: float,
    transfer: list[tuple[int, float]] | None = None,
) -> Handoff:
    """Lines through (prompt tokens, handoff seconds) and, when given, through (prompt tokens,
    the server's transfer seconds) for the serial part; without it the whole handoff is
    serial."""
    if not samples:
        raise ValueError("fit_handoff: no samples")
    latency, per_token = _line([s.prompt_tokens for s in samples], [s.handoff_s for s in samples])
    serial = (latency, per_token)
    if transfer:
        serial = _line([n for n, _ in transfer], [t for _, t in transfer])
    return Handoff(
        latency, per_token, bytes_per_token, *serial, list(samples), list(transfer or [])
    )


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line with both >= 0: a slope the points cannot
    support (noise larger than the transfer) is 0 and the intercept their mean; a negative
    intercept is 0 with the slope through the origin."""
    x, y = np.array(xs, dtype=float), np.array(ys, dtype=float)
    slope, intercept = 0.0, float(np.mean(y))
    if len(set(xs)) > 1:
        slope, intercept = (float(v) for v in np.polyfit(x, y, 1))
    if slope < 0:
        slope, intercept = 0.0, float(np.mean(y))
    if intercept < 0:
        intercept, slope = 0.0, max(float(np.dot(x, y) / np.dot(x, x)), 0.0)
    return max(intercept, 0.0), slope
