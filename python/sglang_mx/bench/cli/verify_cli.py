"""`sglang-mx bench verify CLAIM --url URL`: run a claim file's workload N times against a live
endpoint and judge the claim (verdict.py), writing result.json, verdict.json, report.md,
report.html and the plots into one directory.

Exit status: 0 reproduced, 1 not reproduced or inconclusive, 2 the run could not start (a bad
claim, an unreachable server, a workload that does not fit; one line per problem)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from sglang_mx.bench.claims.judge import JudgeSettings, claims_own_hardware, figure_value, judge
from sglang_mx.bench.load.limits import BenchError
from sglang_mx.bench.run.task_eval import TASKS
from sglang_mx.measure.summary import RunSummary


def _lengths(spec) -> str:
    return f"{spec.input_len.mean:g} in / {spec.output_len.mean:g} out"


def build_trace(claim, args, limits):
    """The claim's trace, and what was changed to run it here ({} when nothing was)."""
    from sglang_mx.bench.cli.args import target_context
    from sglang_mx.bench.load.limits import fit_to_context
    from sglang_mx.bench.load.traceio import TraceOptions, fit_trace, load_trace
    from sglang_mx.measure.tracegen import generate

    ctx, changes = target_context(args, limits), []
    if claim.trace_path is not None:
        fmt = claim.raw["workload"].get("trace_format", "auto")
        opts = TraceOptions(max_requests=args.num_requests)
        trace = load_trace(claim.trace_path, fmt, opts)
        if ctx:
            fitted = fit_trace(claim.trace_path, fmt, opts, ctx)
            if fitted.spec.name != trace.spec.name:
                changes.append(
                    f"trace lengths x{fitted.source['options']['length_scale']:.4g} "
                    f"to fit a {ctx}-token context (--fit-context)"
                )
            trace = fitted
        if args.num_requests:
            changes.append(f"first {len(trace.requests)} requests of the trace (--num-requests)")
        return trace, changes
    spec = claim.spec()
    if args.num_requests and args.num_requests != spec.num_requests:
        changes.append(f"num_requests {spec.num_requests} -> {args.num_requests} (--num-requests)")
        spec = spec.with_overrides(num_requests=args.num_requests)
    if ctx:
        fitted = fit_to_context(spec, ctx)
        if fitted != spec:
            factor = fitted.input_len.mean / spec.input_len.mean
            changes.append(
                f"lengths x{factor:.4g}: {_lengths(spec)} -> {_lengths(fitted)} "
                f"tokens to fit a {ctx}-token context (--fit-context)"
            )
            spec = fitted
    return generate(spec), changes


def offered_load(trace, claim) -> tuple[float, float]:
    """Requests/s and streamed tokens/s the client must sustain: an open-loop trace's mean rate
    times its mean output; a closed loop's from the claimed output tokens/s, where it states it
    (else its concurrency over a second per request: the client's share is then small)."""
    reqs = trace.requests
    out_mean = sum(r.output_len for r in reqs) / max(1, len(reqs))
    arrivals = [r.arrival_s for r in reqs if r.arrival_s is not None]
    if arrivals and max(arrivals) > 0:
        req_s = (len(arrivals) - 1) / max(arrivals)
    elif claim.figure == "output_tok_s":
        req_s = claim.raw["claimed"]["value"] / max(1.0, out_mean)
    else:
        req_s = float(trace.spec.concurrency)
    return req_s, req_s * out_mean


def load_processes(args, trace, claim, calibration) -> dict:
    """How many load processes the claim's rate needs (by the calibration) and how many the run
    uses: --processes where given, else the need, at most this box's cores."""
    import os

    from sglang_mx.bench.load.client_check import processes_needed

    req_s, tok_s = offered_load(trace, claim)
    cores = os.cpu_count() or 1
    need, basis = (
        processes_needed(req_s, tok_s, calibration) if calibration
        else (None, "no --calibration: the need is unknown (bench calibrate measures it)")
    )  # fmt: skip
    if args.processes is not None:
        use, why = args.processes[0], "--processes"
    else:
        use, why = min(need or 1, cores), ("the need" if need else "the default")
    out = {"offered_req_s": req_s, "offered_tok_s": tok_s, "needed": need, "basis": basis,
           "processes": use, "chosen_by": why, "cores": cores}  # fmt: skip
    if need and use < need:
        out["warning"] = (
            f"the claim's rate ({req_s:.3g} req/s, {tok_s:.4g} streamed tok/s) needs {need} "
            f"load processes by the calibration and this run uses {use}"
            + (f" (this box has {cores} cores)" if need > cores else "")
            + ": it may be client-bound"
        )
    return out


def verify_slo(claim, args):
    """The SLO a verify run is judged by, and where it came from: the claim's, with each --slo*
    flag given on the command line taking the place of the claim's value (no flag is accepted
    and ignored; issue 43). The source text goes into the verdict."""
    from sglang_mx.measure.run_flags import slo_flags_given, slo_from_args

    try:
        slo = slo_from_args(args, claim.slo())
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    given = slo_flags_given(args)
    if not given:
        return slo, f"the claim's ({slo.describe()})"
    return slo, f"the command line's over the claim's: {', '.join(given)} ({slo.describe()})"


def _cost(claim, args, summary: RunSummary) -> dict:
    from sglang_mx.bench.cli.args import cost_inputs
    from sglang_mx.capacity.cost import cost_report

    try:
        gpus, price, _, source = cost_inputs(args)
    except BenchError:  # not in the table: the claim's own hardware (CPU) or another box
        own = claims_own_hardware(claim, args.hardware)
        gpus, price = args.gpus or (claim.hardware[1] if own else 1), args.price or 0.0
        source = "--price on the command line" if price else ""
    if not price:  # nothing stated here: the claim's own price, named as such
        p = claim.raw["price"]
        gpus, price = claim.hardware[1], float(p["usd_per_gpu_hour"])
        source = f"the claim's price: {p['source']} ({p['date']}), for {gpus} GPUs"
    return cost_report(summary, price, gpus, price_source=source)


def check_claim(claim) -> dict:
    """`verify --check`'s record of the claim (its arithmetic, price basis, what it leaves
    unstated), which a verify run's report shows beside its verdict."""
    from sglang_mx.bench.claims.claim_check import check

    return check(claim)


def cmd_check(args) -> int:
    """`verify --check`: the claim's arithmetic, price basis and gaps; no endpoint. Exit 0 when
    it is consistent, 1 when it contradicts itself or its sources."""
    from sglang_mx.bench.claims.claim_check import check, render
    from sglang_mx.bench.claims.claim_file import load_claim

    given: dict[str, str] = {}  # dest -> its first flag (--slo-ttft before its old --slo)
    for flag, dest, default in RUN_FLAGS:
        if getattr(args, dest) != default:
            given.setdefault(dest, flag)
    if given:
        raise BenchError(
            f"--check reads the claim without running it: drop {', '.join(given.values())}, "
            "or drop --check to run the claim"
        )
    record = check(load_claim(args.claim))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "check.json").write_text(json.dumps(record, indent=1))
    print(render(record))
    print(f"\n{out / 'check.json'}")
    return 0 if record["consistent"] else 1


# (flag, dest, default) of every verify flag that only a run reads (set at register)
RUN_FLAGS: list[tuple[str, str, object]] = []
NOT_RUN_FLAGS = ("claim", "check", "out", "help")


def cmd_verify(args) -> int:
    from sglang_mx.bench.claims.claim_file import load_claim

    if args.check:
        return cmd_check(args)
    missing = [f for f, dest in (("--url", "url"), ("--tokenizer", "tokenizer"))
               if getattr(args, dest) is None]  # fmt: skip
    if missing:
        raise BenchError(
            f"{' and '.join(missing)} required to run a claim (--check reads it without an "
            "endpoint)"
        )
    from sglang_mx.bench.cli.args import run_config
    from sglang_mx.bench.load.limits import check_fits, fetch_limits
    from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer
    from sglang_mx.bench.report.html_page import write_report
    from sglang_mx.bench.report.result import Claimed, measured
    from sglang_mx.bench.run.pipeline import measure
    from sglang_mx.bench.run.runner import loud

    claim = load_claim(args.claim)
    public = claim.raw["workload"].get("public_trace")
    if public and claim.trace_path is None:
        raise BenchError(
            f"claim {claim.id!r}: its workload is {public}: it can be read (bench verify "
            "--check), not run"
        )
    slo, slo_source = verify_slo(claim, args)
    if args.repeats < 1:
        raise BenchError(f"--repeats {args.repeats} must be at least 1")
    if args.agreement_tokens < 1:
        raise BenchError(f"--agreement-tokens {args.agreement_tokens} must be at least 1")
    if args.accuracy_problems is not None and args.accuracy_problems < 0:
        raise BenchError(f"--accuracy-problems {args.accuracy_problems}: 0 (skip) or more")
    cfg = run_config(args)
    cfg.limits = fetch_limits(cfg.base_url, args.api_key)
    trace, changes = build_trace(claim, args, cfg.limits)
    try:
        check_fits(trace, cfg.limits)
    except BenchError as exc:
        raise BenchError(f"claim {claim.id!r}: {exc}") from None
    agreed = None
    if args.reference:  # before the load: a model that computes the wrong thing fails fast
        from sglang_mx.bench.claims.judge import agreement_bounds
        from sglang_mx.bench.run import agreement

        agreement_bounds(claim.raw, args.agreement_top1)  # a bad flag stops the run here
        print(f"== {claim.id}: agreement with {args.reference}", file=sys.stderr)
        agreed = agreement.measure(
            cfg.base_url, args.reference.rstrip("/"), args.model, args.reference_model,
            agreement.load_prompts(), args.agreement_tokens, args.api_key, args.reference_api_key,
        )  # fmt: skip
    scored = None
    stated = claim.raw.get("accuracy")
    if stated and stated["task"].lower() in TASKS and args.accuracy_problems != 0:
        from sglang_mx.bench.run.task_eval import run_humaneval

        print(f"== {claim.id}: {stated['task']} task eval", file=sys.stderr)
        scored = run_humaneval(cfg.base_url, args.model, args.api_key, args.accuracy_problems)
    warnings = [loud(f"WORKLOAD SCALED: {c}") for c in changes]
    load = load_processes(args, trace, claim, cfg.calibration)
    cfg.processes = load["processes"]
    print(f"== {claim.id}: load generator: {load['processes']} process(es) ({load['chosen_by']}; "
          f"needed: {load['needed'] or 'unknown'}, {load['basis']})", file=sys.stderr)  # fmt: skip
    if "warning" in load:
        warnings.append(loud(load["warning"]))
    tokens = SegmentTokens(load_tokenizer(args.tokenizer))
    n, repeats = len(trace.requests), range(1, args.repeats + 1)
    runs = [(i, trace, f"{claim.id}: repeat {i} of {args.repeats}, {n} requests") for i in repeats]
    m = measure(runs, cfg, tokens, slo)
    gpus = args.gpus or (claim.hardware[1] if args.hardware else 1)
    summaries = [p.summary for p in m.points]
    verdict = judge(claim, summaries, changes, JudgeSettings.from_args(args), gpus, agreed, scored)
    verdict = dataclasses.replace(verdict, slo_source=slo_source)
    median = sorted(summaries, key=lambda s: figure_value(s, claim.figure))[len(summaries) // 2]
    hw_name = f"{gpus}x {args.hardware}" if args.hardware else None
    result = measured(m, cfg, hw_name, trace.spec.to_dict(), "repeat", slo, None, gpus,
                      tuple(warnings), {"claim_file": str(claim.path)})  # fmt: skip
    claimed = Claimed(claim.raw, trace.source, load, verdict, check_claim(claim))
    result = dataclasses.replace(result, cost=_cost(claim, args, median), claimed=claimed)
    out = Path(args.out)
    paths = write_report(result, out)
    (out / "verdict.json").write_text(verdict.file_json())
    print(Path(paths["markdown"]).read_text())
    print(
        f"verdict: {verdict.verdict} (measured {verdict.measured:.4g} vs claimed "
        f"{verdict.claimed:g}, ratio {verdict.ratio:.3g}); {out / 'verdict.json'}"
    )
    return 0 if verdict.verdict == "reproduced" else 1


AGREEMENT_FLAGS = (  # bench/run/agreement.py
    ("--reference", {"metavar": "URL", "help": "a reference deployment of the same model: the "
     "endpoint's top-1 agreement and KL with it on fixed prompts gate the verdict"}),
    ("--reference-model", {"help": "model name at --reference (default: its first)"}),
    ("--reference-api-key", {"help": "API key of --reference"}),
    ("--agreement-top1", {"type": float, "help": "least top-1 agreement with --reference "
     "(default: the claim's agreement.top1_min, else 0.8)"}),
    ("--agreement-tokens", {"type": int, "default": 32, "help": "tokens of the reference's "
     "greedy continuation scored per prompt (default 32)"}),
    ("--accuracy-problems", {"type": int, "help": "for a claim that states an accuracy on a "
     "task this project ships (humaneval): the first N problems (default all; 0 skips)"}),
)  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    from sglang_mx.bench.cli.args import one_line_errors, run_args
    from sglang_mx.capacity.flags import add_requests_args

    p = subparsers.add_parser("verify", help="a claim file in, a verdict out (N repeats, 95%% CI)")
    p.add_argument("claim", help="claim file (YAML or JSON; benchmark/claims/)")
    p.add_argument(
        "--check",
        action="store_true",
        help="read the claim without running it: its arithmetic, price basis and what it "
        "leaves unstated (no endpoint; writes check.json)",
    )
    # --url/--tokenizer: required to run, not to --check (cmd_verify says which is missing)
    run_args(p, endpoint_required=False)
    p.add_argument("--repeats", type=int, default=3, help="runs of the workload (default 3)")
    p.add_argument(
        "--tolerance",
        type=float,
        help="share the measured figure may fall short of the claim (default: the "
        "claim's, else 0.10)",
    )
    add_requests_args(p, seed=False)  # a claim's trace is its own
    for flag, options in AGREEMENT_FLAGS:
        p.add_argument(flag, **options)
    p.set_defaults(func=one_line_errors(cmd_verify))
    RUN_FLAGS[:] = [
        (a.option_strings[-1], a.dest, a.default)
        for a in p._actions
        if a.dest not in NOT_RUN_FLAGS and a.option_strings
    ]
