"""`sglang-mx bench ...`: gen | run | sweep | report | compare | agents."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sglang_mx.bench.cli.args import (
    cost_inputs,
    one_line_errors,
    run_args,
    run_config,
    slo_from_args,
)
from sglang_mx.capacity.flags import add_workload_arg

SPEC_FIELDS = (
    "hit_rate",
    "turns",
    "prefix_groups",
    "num_requests",
    "arrival",
    "rate",
    "concurrency",
    "seed",
)


def _spec_args(p: argparse.ArgumentParser) -> None:
    add_workload_arg(p, "cpu-2k-32-60", old="--preset")
    p.add_argument("--input-len", help="N, uniform:LO:HI or normal:MEAN:STD")
    p.add_argument("--output-len", help="N, uniform:LO:HI or normal:MEAN:STD")
    p.add_argument("--hit-rate", type=float, help="target share of prompt tokens served from cache")
    p.add_argument("--turns", type=int, help="turns per session (1 = shared prefixes only)")
    p.add_argument("--prefix-groups", type=int)
    p.add_argument("--num-requests", type=int)
    p.add_argument("--arrival", choices=("poisson", "fixed-rate", "concurrency"))
    p.add_argument("--rate", type=float, help="requests/s")
    p.add_argument("--concurrency", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--no-prime", action="store_true", help="don't pre-send the shared prefixes")


def _spec(args: argparse.Namespace):
    from sglang_mx.bench.load.limits import BenchError
    from sglang_mx.capacity.workload import LengthDist, named_workload

    over = {k: getattr(args, k) for k in SPEC_FIELDS}
    for key in ("input_len", "output_len"):
        if getattr(args, key):
            over[key] = LengthDist.parse(getattr(args, key))
    if args.no_prime:
        over["prime"] = False
    changed = {k: v for k, v in over.items() if v is not None}
    try:
        spec = named_workload(args.workload).with_overrides(**changed)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    # a modified preset must not pass for the published one in reports
    return spec.with_overrides(name=f"{args.workload}+custom") if changed else spec


def _fit_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fit-context",
        action="store_true",
        help="scale input and output lengths by one factor (ratio, hit rate and load kept) so "
        "the workload fits the server's context length",
    )


def _execute(args, kind: str, values: list[float]) -> int:
    from sglang_mx.bench.load.limits import check_fits, fetch_limits, fit_to_context
    from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer, materialize
    from sglang_mx.bench.report.html_page import write_report
    from sglang_mx.bench.run.runner import run_trace
    from sglang_mx.capacity.cost import cost_report
    from sglang_mx.measure.stamp import stamp
    from sglang_mx.measure.summary import RunSummary
    from sglang_mx.measure.sweep import SweepPoint, knee, sweep_specs
    from sglang_mx.measure.tracegen import generate

    slo = slo_from_args(args)
    # the cost inputs before anything is sent: an unknown --hardware once ended a 20-minute run
    gpus, price, hw_name, price_source = cost_inputs(args)
    tokens = SegmentTokens(load_tokenizer(args.tokenizer))
    cfg = run_config(args)
    # the server's context and vocabulary, read once: every point is checked before any runs
    cfg.limits = fetch_limits(cfg.base_url, args.api_key)
    if getattr(args, "trace", None):
        traces = [trace_from_args(args, cfg.limits.context_length)]
        spec = traces[0].spec
    else:
        spec = _spec(args)
        if args.fit_context and cfg.limits.context_length:
            spec = fit_to_context(spec, cfg.limits.context_length)
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
            "slo": args.slo,
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


def _cmd_gen(args) -> int:
    from sglang_mx.measure.tracegen import generate

    trace = generate(_spec(args))
    path = trace.save(args.out)
    print(
        f"{path}: {len(trace.requests)} requests, shared prefix {trace.prefix_len} tokens, "
        f"designed hit rate {trace.predicted_hit_rate:.4f}"
    )
    return 0


def trace_args(p: argparse.ArgumentParser) -> None:
    from sglang_mx.bench.load.traceio import FORMATS

    p.add_argument("--trace", help="replay this trace file instead of generating one")
    p.add_argument("--trace-format", default="auto", choices=("auto", *FORMATS),
                   help="the trace's format (default: detected from its first line)")  # fmt: skip
    p.add_argument("--trace-time-scale", type=float, default=1.0,
                   help="multiply every arrival time (0.5: twice as fast)")  # fmt: skip
    p.add_argument("--trace-sample", type=float, default=1.0,
                   help="keep each request with this probability (seeded by --seed)")  # fmt: skip
    p.add_argument("--max-requests", type=int, help="replay at most this many requests")


def trace_from_args(args, context_length: int | None = None):
    """The --trace file as a Trace; with --fit-context, its lengths scaled into the context."""
    from sglang_mx.bench.load.traceio import TraceOptions, fit_trace, load_trace

    opts = TraceOptions(
        time_scale=args.trace_time_scale,
        sample=args.trace_sample,
        max_requests=args.max_requests,
        seed=args.seed or 0,
    )
    if getattr(args, "fit_context", False) and context_length:
        return fit_trace(args.trace, args.trace_format, opts, context_length)
    return load_trace(args.trace, args.trace_format, opts)


@one_line_errors
def _cmd_run(args) -> int:
    if args.trace:
        spec = trace_from_args(args).spec
    else:
        spec = _spec(args)
    if spec.arrival == "concurrency":
        return _execute(args, "concurrency", [spec.concurrency])
    return _execute(args, "rate", [spec.rate])


@one_line_errors
def _cmd_sweep(args) -> int:
    if bool(args.rates) == bool(args.concurrencies):
        print("give exactly one of --rates or --concurrencies", file=sys.stderr)
        return 2
    kind, raw = ("rate", args.rates) if args.rates else ("concurrency", args.concurrencies)
    return _execute(args, kind, [float(v) for v in raw.split(",")])


@one_line_errors
def _cmd_ledger_export(args) -> int:
    from sglang_mx.bench.load.traces_ledger import export_ledger

    n = export_ledger(args.db, args.out, args.since)
    print(f"{args.out}: {n} requests (lengths, cached tokens, arrival times; no content)")
    return 0


def _cmd_report(args) -> int:
    from sglang_mx.bench.report.html_page import write_report

    result = json.loads(Path(args.result).read_text())
    paths = write_report(result, args.out or Path(args.result).parent)
    print("\n".join(str(p) for p in paths.values()))
    return 0


def _pick(result: dict) -> dict:
    """The knee point's summary (or the last point) of a result file, with its cost figures."""
    points = result["sweep"]["points"]
    knee = result["sweep"].get("knee")
    x = knee["x"] if knee else points[-1]["x"]
    summary = dict(next(p["summary"] for p in points if p["x"] == x))
    summary["cost"] = result.get("cost", {})
    return summary


def _cmd_compare(args) -> int:
    from sglang_mx.measure.compare import compare, markdown_table

    a, b = (json.loads(Path(p).read_text()) for p in (args.a, args.b))
    labels = (args.labels or f"{a['stamp']['hardware']},{b['stamp']['hardware']}").split(",")
    table = markdown_table(compare(_pick(a), _pick(b)), labels[0], labels[1])
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0


AGENT_PROGRAMS = ("tool_agent", "review_forkjoin", "multiturn_chat")
# Over the OpenAI chat route with tools (needs the server's --tool-call-parser); not in "all".
TOOL_PROGRAMS = ("tool_calls",)
TOOL_TURN_TOKENS = 128  # a turn holds reasoning and a call: at least this many tokens


def _cmd_agents(args) -> int:
    """The DSL agent programs through `sgl.RuntimeEndpoint`: against the provider with
    --api-key (cached-token ratio and billed cost per program run), or SGLang directly."""
    import importlib

    from sglang_mx.bench.agents.common import run_via_provider

    names = AGENT_PROGRAMS if args.program == "all" else (args.program,)
    kwargs = {"max_tokens": args.max_tokens}
    if args.context_chars:
        kwargs["context_chars"] = args.context_chars
    rows = []
    for name in names:
        module = importlib.import_module(f"sglang_mx.bench.agents.{name}")
        if name in TOOL_PROGRAMS:
            rows.append(module.run(args.url.rstrip("/"), args.api_key, args.sessions,
                                   max(args.max_tokens, TOOL_TURN_TOKENS)))  # fmt: skip
            continue
        func = getattr(module, {"review_forkjoin": "review", "multiturn_chat": "chat"}.get(
            name, name))  # fmt: skip
        if args.api_key:
            res = run_via_provider(
                func, args.url.rstrip("/"), args.api_key, args.sessions, **kwargs
            )
        else:  # SGLang itself: same report, no cost (nothing is billed), cache flushed first
            from sglang_mx.bench.agents.common import run_program

            meter, wall = run_program(func, args.url.rstrip("/"), args.sessions, True, **kwargs)
            res = {"program": name, "sessions": args.sessions, "calls": len(meter.calls),
                   "prompt_tokens": meter.prompt_tokens, "cached_tokens": meter.cached_tokens,
                   "completion_tokens": sum(c.completion_tokens for c in meter.calls),
                   "cached_ratio": meter.hit_rate, "cost_usd": None, "cost_usd_per_run": None,
                   "wall_s": wall, "meter": meter}  # fmt: skip
        res.pop("meter")
        res["program"] = name
        rows.append(res)
    print("| program | runs | calls | prompt tok | cached tok | cached ratio | USD per run |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        usd = "-" if r["cost_usd_per_run"] is None else f"{r['cost_usd_per_run']:.8f}"
        print(f"| {r['program']} | {r['sessions']} | {r['calls']} | {r['prompt_tokens']} | "
              f"{r['cached_tokens']} | {r['cached_ratio']:.3f} | {usd} |")  # fmt: skip
    if args.out:
        from sglang_mx.measure.stamp import stamp

        config = {"url": args.url, "via_provider": bool(args.api_key), "sessions": args.sessions,
                  "max_tokens": args.max_tokens, "context_chars": args.context_chars}  # fmt: skip
        if args.api_key:  # the prices the costs were billed at
            import httpx

            listed = httpx.get(args.url.rstrip("/") + "/v1/models", params={"format": "legacy"})
            config["pricing"] = {m["id"]: m["pricing"] for m in listed.json()["data"]}
        out = {"stamp": stamp(None, config), "programs": rows}
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="workload generator, load runner, sweeps, reports")
    verbs = parser.add_subparsers(dest="bench_verb", metavar="VERB", required=True)

    p = verbs.add_parser("gen", help="write a seeded JSONL trace")
    _spec_args(p)
    p.add_argument("-o", "--out", default="trace.jsonl")
    p.set_defaults(func=_cmd_gen)

    p = verbs.add_parser("run", help="run one workload (or --trace) against an endpoint")
    _spec_args(p)
    run_args(p)
    _fit_arg(p)
    trace_args(p)
    p.set_defaults(func=_cmd_run)

    p = verbs.add_parser("sweep", help="request-rate or concurrency sweep; finds the knee")
    _spec_args(p)
    run_args(p)
    _fit_arg(p)
    p.add_argument("--rates", help="comma-separated requests/s, e.g. 0.5,1,1.5,2,2.4")
    p.add_argument("--concurrencies", help="comma-separated in-flight counts, e.g. 1,2,4,8")
    p.set_defaults(func=_cmd_sweep, trace=None)

    from sglang_mx.bench.cli import calibrate_cli, sessions_cli, verify

    verify.register(verbs)
    calibrate_cli.register(verbs)
    sessions_cli.register(verbs)

    p = verbs.add_parser("ledger-export", help="the provider ledger as a replayable trace")
    p.add_argument("--db", required=True, help="the provider's SQLite file")
    p.add_argument("-o", "--out", default="ledger.jsonl")
    p.add_argument("--since", type=float, default=0.0, help="only requests from this epoch time")
    p.set_defaults(func=_cmd_ledger_export)

    p = verbs.add_parser("report", help="re-render report.md and plots from a result.json")
    p.add_argument("result")
    p.add_argument("-o", "--out")
    p.set_defaults(func=_cmd_report)

    p = verbs.add_parser("compare", help="head-to-head table of two result.json files")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--labels", help="two comma-separated names")
    p.add_argument("-o", "--out", help="also write the markdown table here")
    p.set_defaults(func=_cmd_compare)

    p = verbs.add_parser(
        "agents",
        help="run the frontend-language agent programs (sgl.RuntimeEndpoint); with --api-key "
        "through the provider, reporting cached-token ratio and cost per program run",
    )
    p.add_argument("--url", required=True, help="provider (with --api-key) or SGLang base URL")
    p.add_argument("--api-key", help="provider key (sk-mx-...), sent as Authorization: Bearer")
    p.add_argument(
        "--program",
        choices=("all", *AGENT_PROGRAMS, *TOOL_PROGRAMS),
        default="all",
        help="all: the frontend-language programs; tool_calls: OpenAI tool calls in a loop "
        "(the server needs --tool-call-parser glm47 --reasoning-parser glm45)",
    )
    p.add_argument("--sessions", type=int, default=2, help="program runs (concurrent)")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=8,
        help=f"tokens per gen() call (tool_calls: per turn, at least {TOOL_TURN_TOKENS})",
    )
    p.add_argument("--context-chars", type=int, help="shared context length (program default)")
    p.add_argument("-o", "--out", help="also write the results as JSON here")
    p.set_defaults(func=_cmd_agents)
    # Every verb ends a run that cannot start in one line on stderr and status 2.
    for sub in verbs.choices.values():
        sub.set_defaults(func=one_line_errors(sub.get_default("func")))
