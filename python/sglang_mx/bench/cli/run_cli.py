"""`sglang-mx bench run`: one workload (or --trace) against an endpoint; `execute` runs the
points of a run or a sweep (sweep_cli) and writes result.json and the reports."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from sglang_mx.bench.cli.args import (
    cost_inputs,
    run_args,
    run_config,
    spec_from_args,
    target_context,
    trace_args,
    trace_from_args,
    workload_args,
)
from sglang_mx.measure.run_flags import slo_from_args


def execute(args, kind: str, values: list[float]) -> int:
    from sglang_mx.bench.load.limits import BenchError, fetch_limits, fit_to_context
    from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer
    from sglang_mx.bench.report.html_page import write_report
    from sglang_mx.bench.report.result import measured
    from sglang_mx.bench.run.pipeline import measure
    from sglang_mx.capacity.cost import cost_report
    from sglang_mx.measure.sweep import knee, sweep_specs
    from sglang_mx.measure.tracegen import generate

    try:
        slo = slo_from_args(args)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    # the cost inputs before anything is sent: an unknown --hardware once ended a 20-minute run
    gpus, price, hw_name, price_source = cost_inputs(args)
    tokens = SegmentTokens(load_tokenizer(args.tokenizer))
    cfg = run_config(args)
    # the server's context and vocabulary, read once: every point is checked before any runs
    cfg.limits = fetch_limits(cfg.base_url, args.api_key)
    context = target_context(args, cfg.limits)
    if getattr(args, "trace", None):
        traces = [trace_from_args(args, context)]
        spec = traces[0].spec
    else:
        spec = spec_from_args(args)
        if context:
            spec = fit_to_context(spec, context)
        traces = [generate(s) for s in sweep_specs(spec, kind, values)]
    runs = [
        (x, t, f"{kind} {x}: {len(t.requests)} requests, designed hit rate "
         f"{t.predicted_hit_rate:.3f}")
        for x, t in zip(values, traces, strict=False)
    ]  # fmt: skip
    m = measure(runs, cfg, tokens, slo)
    result = measured(m, cfg, hw_name, spec.to_dict(), kind, slo, knee(m.points, slo), gpus)
    if price:
        best = result.sweep.best().summary
        result = dataclasses.replace(
            result, cost=cost_report(best, price, gpus, price_source=price_source)
        )
    paths = write_report(result, args.out)
    print(Path(paths["markdown"]).read_text())
    return _status(result)


def _status(result) -> int:
    """1 (saying why on stderr) when a request failed or a token audit did, else 0."""
    summaries = [p.summary for p in result.sweep.points]
    failed = sum(s.errors for s in summaries)
    if failed:
        first = next(s.first_error or "" for s in summaries if s.errors)
        total = sum(s.requests for s in summaries)
        print(f"{failed} of {total} requests failed, first: {first[:300]}", file=sys.stderr)
        return 1
    bad = [s.audit.message for s in summaries if s.audit and not s.audit.ok]
    if bad:
        print(f"token audit failed: {bad[0]}", file=sys.stderr)
        return 1
    return 0


def _cmd_run(args) -> int:
    if args.trace:
        spec = trace_from_args(args).spec
    else:
        spec = spec_from_args(args)
    if spec.arrival == "concurrency":
        return execute(args, "concurrency", [spec.concurrency])
    return execute(args, "rate", [spec.rate])


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run one workload (or --trace) against an endpoint")
    workload_args(p)
    run_args(p)
    trace_args(p)
    p.set_defaults(func=_cmd_run)
