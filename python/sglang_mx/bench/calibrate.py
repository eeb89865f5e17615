"""`sglang-mx bench calibrate --url NULL_SERVER`: the load generator's own ceiling.

Against a server that does no work (`python benchmark/null_upstream.py PORT
--stream-max-tokens`: every streamed request gets its max_tokens at once), the runner sends
open-loop fixed-rate steps of doubling rate, each STEP_S long, until a step's median schedule lag
reaches LAG_LIMIT_S (1 ms), its p99 selfcheck.LAG_LIMIT_S (10 ms), or it delivers under 90% of
its target rate. The ceiling is the last step that passed: requests/s and streamed tokens/s
this client sustains on time. The 1 ms limit is on the median: on a shared 2-core box a p99
under 1 ms is out of reach even at 10 req/s (0.6 ms median, 2.9 ms p99 measured 2026-12-01).
`bench run --calibration FILE` then flags a run that comes near the ceiling (selfcheck.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sglang_mx.bench import selfcheck
from sglang_mx.bench.runner import RunConfig, run_trace
from sglang_mx.bench.tracegen import Trace, TraceRequest
from sglang_mx.bench.workload import WorkloadSpec

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


def run_step(url: str, rate: float, output_len: int, step_s: float = STEP_S) -> dict:
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
    )
    res = run_trace(trace, prompts, cfg)
    s, c = res.summary, res.summary["selfcheck"]
    return {
        "target_req_s": rate,
        "requests": n,
        "errors": s["errors"],
        "req_s": s["request_throughput"],
        "tok_s": s["output_tok_s"],
        "lag_p50_s": c["schedule_lag_s"]["p50"],
        "lag_p99_s": c["schedule_lag_s"]["p99"],
        "client_cpu": c["client_cpu_fraction"],
    }


def passed(step: dict) -> bool:
    return (
        step["errors"] == 0
        and step["lag_p50_s"] < LAG_LIMIT_S
        and step["lag_p99_s"] < selfcheck.LAG_LIMIT_S
        and step["req_s"] >= DELIVERED * step["target_req_s"] * 0.999
    )


def calibrate(
    url: str,
    output_len: int = 32,
    start: float = 25.0,
    max_rate: float = 6400.0,
    step_s: float = STEP_S,
) -> dict:
    """Every step's record and the ceiling (None when even the first step failed)."""
    steps, ceiling, rate = [], None, start
    while rate <= max_rate:
        step = run_step(url, rate, output_len, step_s)
        step["passed"] = passed(step)
        steps.append(step)
        print(
            f"  {rate:8.0f} req/s target: {step['req_s']:8.1f} req/s, {step['tok_s']:9.0f} tok/s,"
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
        }
        rate *= 2
    return {"steps": steps, "ceiling": ceiling}


def _cmd(args) -> int:
    from sglang_mx.bench.limits import BenchError, fetch_limits
    from sglang_mx.bench.stamp import stamp

    url = args.url.rstrip("/")
    fetch_limits(url)  # an unreachable server is one line, exit 2
    if args.with_sglang:
        return _cmd_side_by_side(args, url)
    out = calibrate(url, args.output_len, args.start_rate, args.max_rate, args.step_s)
    if out["ceiling"] is None:
        raise BenchError(
            f"even {args.start_rate:g} req/s missed the lag limits: is "
            "the box busy, or the server not a null server?"
        )
    out["stamp"] = stamp(None, {"url": url, "client": "sglang-mx bench runner"})
    Path(args.out).write_text(json.dumps(out, indent=1))
    c = out["ceiling"]
    print(f"ceiling: {c['req_s']:.1f} req/s, {c['tok_s']:.0f} streamed tok/s ({args.out})")
    return 0


def _cmd_side_by_side(args, url: str) -> int:
    from sglang_mx.bench import calibrate_peer
    from sglang_mx.bench.stamp import stamp

    rates, rate = [], args.start_rate
    while rate <= args.max_rate:
        rates.append(rate)
        rate *= 2
    work = Path(args.out).resolve().parent / "calibrate-sglang"
    out = calibrate_peer.side_by_side(
        url, args.with_sglang, rates, args.output_len, args.step_s, work
    )
    client = "sglang-mx bench runner and python -m sglang.benchmark.serving"
    out["stamp"] = stamp(None, {"url": url, "client": client})
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(calibrate_peer.table(out))
    for name, key in (("ours", "ceiling"), ("SGLang's", "sglang_ceiling")):
        c = out[key]
        print(f"{name} ceiling: " + (f"{c['req_s']:.1f} req/s" if c else "none (first step)"))
    return 0


def register(verbs) -> None:
    from sglang_mx.bench.cli import _one_line_errors

    p = verbs.add_parser("calibrate", help="the load generator's ceiling against a null server")
    p.add_argument("--url", required=True, help="a null server (benchmark/null_upstream.py)")
    p.add_argument("--output-len", type=int, default=32, help="streamed tokens per request")
    p.add_argument("--start-rate", type=float, default=25.0)
    p.add_argument("--max-rate", type=float, default=6400.0)
    p.add_argument("--step-s", type=float, default=STEP_S, help="seconds per rate step")
    p.add_argument(
        "--with-sglang",
        metavar="TOKENIZER_DIR",
        help="also step SGLang's own benchmark client (python -m sglang.benchmark.serving) "
        "through the same rates, each right after ours; its prompts from this tokenizer",
    )
    p.add_argument("-o", "--out", default="calibration.json")
    p.set_defaults(func=_one_line_errors(_cmd))
