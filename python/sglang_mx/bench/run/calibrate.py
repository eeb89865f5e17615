"""`sglang-mx bench calibrate --url NULL_SERVER`: the load generator's own ceiling.

Against a server that does no work (`python benchmark/null_upstream.py PORT
--stream-max-tokens`: every streamed request gets its max_tokens at once), the runner sends
open-loop fixed-rate steps of doubling rate, each STEP_S long, until a step's median schedule lag
reaches LAG_LIMIT_S (1 ms), its p99 client_check.LAG_LIMIT_S (10 ms), or it delivers under 90% of
its target rate. The ceiling is the last step that passed: requests/s and streamed tokens/s
this client sustains on time. The 1 ms limit is on the median: on a shared 2-core box a p99
under 1 ms is out of reach even at 10 req/s (0.6 ms median, 2.9 ms p99 measured 2026-12-01).
`bench run --calibration FILE` then flags a run that comes near the ceiling (client_check.py).

With `--processes 1,2,4` the ladder is climbed again with the load spread over that many worker
processes (loadgen.py), and the file keeps each count's ceiling (`by_processes`): how the client
scales on this box, which `bench verify` reads to size its load generator for a claim's rate."""

from __future__ import annotations

import sys

from sglang_mx.bench.load import client_check
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.capacity.workload import WorkloadSpec
from sglang_mx.measure.tracegen import Trace, TraceRequest

LAG_LIMIT_S = 0.001
STEP_S = 2.0
DELIVERED = 0.90
PROMPT_LEN = 8


def step_trace(rate: float, n: int, output_len: int) -> Trace:
    spec = WorkloadSpec.fixed(
        f"calibrate@{rate:g}",
        PROMPT_LEN,
        output_len,
        hit_rate=0.0,
        num_requests=n,
        arrival="fixed-rate",
        rate=rate,
        prime=False,
    )
    reqs = [
        TraceRequest(f"c{i}", i, 0, [(f"c{i}", PROMPT_LEN)], output_len, 0, arrival_s=i / rate)
        for i in range(n)
    ]
    return Trace(spec, 0, [], reqs)


def run_step(
    url: str, rate: float, output_len: int, step_s: float = STEP_S, processes: int = 1
) -> dict:
    n = max(10, int(rate * step_s))
    trace = step_trace(rate, n, output_len)
    prompts = {r.id: [1] * PROMPT_LEN for r in trace.requests}
    cfg = RunConfig(
        base_url=url,
        flush=False,
        prime=False,
        warmup=0,
        progress=False,
        check_limits=False,
        scrape_metrics=False,
        processes=processes,
    )
    res = run_trace(trace, prompts, cfg)
    s, c = res.summary, res.summary.selfcheck
    return {
        "target_req_s": rate,
        "requests": n,
        "errors": s.errors,
        "req_s": s.request_throughput,
        "tok_s": s.output_tok_s,
        "lag_p50_s": c.schedule_lag_s.p50,
        "lag_p99_s": c.schedule_lag_s.p99,
        "client_cpu": c.client_cpu_fraction,
        "processes": processes,
    }


def passed(step: dict) -> bool:
    return (
        step["errors"] == 0
        and step["lag_p50_s"] < LAG_LIMIT_S
        and step["lag_p99_s"] < client_check.LAG_LIMIT_S
        and step["req_s"] >= DELIVERED * step["target_req_s"] * 0.999
    )


def calibrate(
    url: str,
    output_len: int = 32,
    start: float = 25.0,
    max_rate: float = 6400.0,
    step_s: float = STEP_S,
    processes: int = 1,
) -> dict:
    """Every step's record and the ceiling (None when even the first step failed)."""
    steps, ceiling, rate = [], None, start
    while rate <= max_rate:
        step = run_step(url, rate, output_len, step_s, processes)
        step["passed"] = passed(step)
        steps.append(step)
        print(
            f"  {processes} proc {rate:8.0f} req/s target: {step['req_s']:8.1f} req/s,"
            f" {step['tok_s']:9.0f} tok/s,"
            f" lag p50 {step['lag_p50_s'] * 1e3:6.2f} / p99 {step['lag_p99_s'] * 1e3:6.2f} ms,"
            f" CPU {step['client_cpu']:.0%}"
            f" {'ok' if step['passed'] else 'STOP'}",
            file=sys.stderr,
        )
        if not step["passed"]:
            break
        ceiling = {
            "req_s": step["req_s"],
            "tok_s": step["tok_s"],
            "output_len": output_len,
            "lag_limit_s": LAG_LIMIT_S,
            "processes": processes,
        }
        rate *= 2
    return {"steps": steps, "ceiling": ceiling}


def with_processes(out: dict, counts: list[int], climb) -> dict:
    """`out` (the one-process ladder) with the ladder climbed again at each other count:
    `climb(n)` returns that count's {"steps", "ceiling"}; adds `by_processes` and
    `steps_by_processes` (keys are the counts as strings, JSON's keys)."""
    by, steps = {"1": out["ceiling"]}, {"1": out["steps"]}
    for n in counts:
        if n != 1:
            got = climb(n)
            by[str(n)], steps[str(n)] = got["ceiling"], got["steps"]
    return {**out, "by_processes": by, "steps_by_processes": steps}
