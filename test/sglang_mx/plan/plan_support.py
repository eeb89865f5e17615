"""Small hand-built traces and a linear step cost whose numbers are easy to compute by hand."""

from __future__ import annotations

from sglang_mx.capacity.workload import WorkloadSpec
from sglang_mx.measure.tracegen import Trace, TraceRequest
from sglang_mx.plan.scheduler_config import SchedulerConfig
from sglang_mx.plan.stepcost import LinearStepCost

BASE, PER_TOKEN, PER_DECODE = 0.01, 1e-4, 1e-3
COST = LinearStepCost(BASE, PER_TOKEN, 0.0, PER_DECODE, 0.0)


def trace(requests: list[tuple], arrival: str = "poisson", concurrency: int = 1,
          prime=()) -> Trace:  # fmt: skip
    """requests: (id, segments, output_len, arrival_s[, expected_cached])."""
    spec = WorkloadSpec(arrival=arrival, concurrency=concurrency, num_requests=len(requests))
    reqs = [
        TraceRequest(r[0], i, 0, list(r[1]), r[2], r[4] if len(r) > 4 else 0, r[3])
        for i, r in enumerate(requests)
    ]
    return Trace(spec, 0, list(prime), reqs)


def cfg(**kw) -> SchedulerConfig:
    base = {"max_total_tokens": 100_000, "chunked_prefill_size": 4096, "page_size": 1}
    return SchedulerConfig(**(base | kw))
