"""`sglang-mx bench run`: one workload (or --trace) against an endpoint; `execute` runs the
points of a run or a sweep (sweep_cli) and writes result.json and the reports."""

from __future__ import annotations

import argparse
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
    from sglang_mx.bench.load.limits import BenchError, check_fits, fetch_limits, fit_to_context
    from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer, materialize
    from sglang_mx.bench.report.html_page import write_report
    from sglang_mx.bench.run.runner import run_trace
    from sglang_mx.capacity.cost import cost_report
    from sglang_mx.measure.stamp import stamp
    from sglang_mx.measure.summary import RunSummary
    from sglang_mx.measure.sweep import SweepPoint, knee, sweep_specs
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
    for trace in traces:  # lengths first: a 20k-token trace is refused before it is built
        check_fits(trace, cfg.limits)
    prompts = []
    for trace in traces:
        prompts.append(materialize(trace, tokens))
        sent = max(max(ids) for ids in prompts[-1].values()) if cfg.send_ids else None
        check_fits(trace, cfg.limits, sent if cfg.api == "completions" else None)
    points, warnings = [], []
    for value, trace, ids in zip(values, traces, prompts, strict=False):
        print(
            f"== {kind} {value}: {len(trace.requests)} requests, designed hit rate "
            f"{trace.predicted_hit_rate:.3f}",
            file=sys.stderr,
        )
        res = run_trace(trace, ids, cfg, tokens, slo)
        warnings += res.warnings
        summary = RunSummary.from_dict(res.summary)
        points.append(SweepPoint(value, summary, res.meta).to_dict())
    result = {
        "stamp": stamp(
            hw_name,
            {
                "url": cfg.base_url,
                "api": cfg.api,
                "model": points[0]["meta"]["model"],
                "send_ids": cfg.send_ids,
            },
        ),
        "workload": spec.to_dict(),
        "sweep": {
            "kind": kind,
            "points": points,
            "knee": knee(points, slo),
            "slo": slo.ttft_p95_s,
            "slo_text": slo.describe(),
        },
        "gpus": gpus,
        "warnings": warnings,
    }
    best = result["sweep"]["knee"] or {"x": points[-1]["x"]}
    best_summary = next(p["summary"] for p in points if p["x"] == best["x"])
    if price:
        result["cost"] = cost_report(best_summary, price, gpus, price_source=price_source)
    paths = write_report(result, args.out)
    print(Path(paths["markdown"]).read_text())
    failed = sum(p["summary"]["errors"] for p in points)
    if failed:
        first = next(p["summary"]["first_error"] for p in points if p["summary"]["errors"])
        total = sum(p["summary"]["requests"] for p in points)
        print(f"{failed} of {total} requests failed, first: {first[:300]}", file=sys.stderr)
        return 1
    bad = [p["summary"]["audit"]["message"] for p in points if not p["summary"]["audit"]["ok"]]
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
