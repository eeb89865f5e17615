"""The flags bench's verbs share and their readers, one definition each (test_cli_flags): the
workload (workload_args, spec_from_args), a run against an endpoint (run_args, run_config), a
trace file (trace_args, trace_from_args), --fit-context, --processes, --ignore-eos,
--trace-format; the SLO and sweep flags come from measure.run_flags, the capacity-model ones
from capacity.flags, so `plan` and `roofline` spell them the same."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sglang_mx.capacity.flags import (
    add_concurrency_arg,
    add_hardware_args,
    add_page_size_arg,
    add_requests_args,
    add_shape_args,
    add_workload_arg,
)
from sglang_mx.measure.run_flags import add_slo_args

MAX_PROCESSES = 64  # load worker processes (loadgen.py)


def workload_args(p: argparse.ArgumentParser) -> None:
    """--workload NAME (old: --preset) and every flag that overrides it (spec_from_args)."""
    add_workload_arg(p, "cpu-2k-32-60", old="--preset")
    add_shape_args(p)
    p.add_argument("--turns", type=int, help="turns per session (1 = shared prefixes only)")
    p.add_argument("--prefix-groups", type=int)
    add_requests_args(p)
    p.add_argument("--arrival", choices=("poisson", "fixed-rate", "concurrency"))
    p.add_argument("--rate", type=float, help="requests/s")
    add_concurrency_arg(p)
    p.add_argument("--no-prime", action="store_true", help="don't pre-send the shared prefixes")


SPEC_FIELDS = ("input_len", "output_len", "hit_rate", "turns", "prefix_groups", "num_requests",
               "arrival", "rate", "concurrency", "seed")  # fmt: skip


def spec_from_args(args: argparse.Namespace):
    """The --workload spec with each override flag given; a changed one is named NAME+custom so
    it cannot pass for the published preset in a report."""
    from sglang_mx.bench.load.limits import BenchError
    from sglang_mx.capacity.workload import named_workload

    over = {k: getattr(args, k) for k in SPEC_FIELDS}
    if args.no_prime:
        over["prime"] = False
    changed = {k: v for k, v in over.items() if v is not None}
    try:
        spec = named_workload(args.workload).with_overrides(**changed)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    return spec.with_overrides(name=f"{args.workload}+custom") if changed else spec


def fit_context_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fit-context", type=int, nargs="?", const=0, default=None, metavar="N",
                   help="scale input and output lengths by one factor (ratio, hit rate and load "
                   "kept) to fit the server's context length (or N tokens); reports say the "
                   "workload was scaled")  # fmt: skip


def target_context(args, limits) -> int | None:
    """The context --fit-context scales into: its own N, else the server's; None without it."""
    from sglang_mx.bench.load.limits import BenchError

    if getattr(args, "fit_context", None) is None:
        return None
    if args.fit_context > 0:
        return min(args.fit_context, limits.context_length or args.fit_context)
    if not limits.context_length:
        raise BenchError("the server does not state its context length; give --fit-context N")
    return limits.context_length


def process_counts(text: str) -> tuple[int, ...]:
    """argparse type of --processes: N, or counts N,M,... (calibrate climbs each)."""
    try:
        counts = tuple(int(x) for x in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a count like 2, or counts like 1,2,4")
    return counts


def processes_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--processes", type=process_counts, metavar="N[,N...]",
                   help="load worker processes sharing one clock (run, sweep: default 1; verify: "
                   "as many as the claim's rate needs by --calibration; calibrate: counts like "
                   "1,2,4 to climb with, default 1)")  # fmt: skip


def ignore_eos_arg(p: argparse.ArgumentParser, default: bool) -> None:
    """--ignore-eos / --no-ignore-eos; the default is each verb's (run, sweep, verify: on, so
    outputs are the workload's lengths; sessions: off, turns end where the model ends them)."""
    p.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=default,
                   help="ask the server to generate every request's full max_tokens (run, "
                   "sweep, verify: on; sessions: off)")  # fmt: skip


def trace_format_arg(p: argparse.ArgumentParser, default: str = "auto") -> None:
    from sglang_mx.bench.load.sessions import SESSION_FORMATS
    from sglang_mx.bench.load.traceio import FORMATS

    p.add_argument("--trace-format", default=default, choices=("auto", *FORMATS, *SESSION_FORMATS),
                   help="the trace file's format (default: detected from the file); run reads "
                   f"{', '.join(FORMATS)}; sessions reads "
                   f"{', '.join(SESSION_FORMATS)}")  # fmt: skip


def url_arg(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--url", required=required,
                   help="base URL of the endpoint: an OpenAI-compatible server (calibrate: a "
                   "null server, benchmark/null_upstream.py; agents: the provider with "
                   "--api-key, else SGLang)")  # fmt: skip


def model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model name to request (default: first of /v1/models)")


def api_key_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--api-key", help="sent as Authorization: Bearer (a provider key, sk-mx-...)")


def trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", help="replay this trace file instead of generating one")
    trace_format_arg(p)
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
    if context_length:
        return fit_trace(args.trace, args.trace_format, opts, context_length)
    return load_trace(args.trace, args.trace_format, opts)


def run_args(p: argparse.ArgumentParser, endpoint_required: bool = True) -> None:
    """The flags of a run against an endpoint; `endpoint_required=False` leaves --url and
    --tokenizer to the command (verify --check needs neither)."""
    url_arg(p, endpoint_required)
    p.add_argument("--tokenizer", required=endpoint_required,
                   help="model dir or tokenizer.json (offline)")  # fmt: skip
    model_arg(p)
    p.add_argument("--api", choices=("completions", "chat"), default="completions")
    p.add_argument("--send-text", action="store_true", help="send decoded text, not token ids")
    p.add_argument("--no-flush", action="store_true")
    ignore_eos_arg(p, True)
    add_page_size_arg(p, 1)
    p.add_argument("--warmup", type=int, default=2, help="unmeasured requests sent first")
    api_key_arg(p)
    add_slo_args(p)
    add_hardware_args(p, None, None)
    p.add_argument("--price", type=float, help="$ per GPU-hour (default: hardware table)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("-o", "--out", default="bench-results", help="output directory")
    p.add_argument(
        "--audit-tolerance",
        type=float,
        default=0.01,
        help="largest relative disagreement of token counts before a run fails",
    )
    p.add_argument("--calibration", help="the client's ceiling (bench calibrate's JSON)")
    processes_arg(p)
    fit_context_arg(p)


def cost_inputs(args) -> tuple[int, float, str | None, str]:
    """(GPUs, $/GPU-h, hardware name, where the price came from)."""
    from sglang_mx.bench.load.limits import BenchError
    from sglang_mx.capacity.hardware import get_hardware

    given = "--price on the command line"
    if args.hardware:
        try:
            hw = get_hardware(args.hardware)
        except KeyError as exc:
            raise BenchError(str(exc).strip("'\"")) from None
        gpus = args.gpus or hw.gpus_per_node
        if args.price is not None:
            return gpus, args.price, f"{gpus}x {hw.name}", given
        source = f"data/hardware.json {hw.name}: {hw.price_source}"
        return gpus, hw.price_per_gpu_hour, f"{gpus}x {hw.name}", source
    return args.gpus or 1, args.price or 0.0, None, given if args.price else ""


def run_config(args):
    """The runner's settings from the run flags (the server's limits are read separately)."""
    import json as _json

    from sglang_mx.bench.load.limits import BenchError
    from sglang_mx.bench.run.runner import RunConfig

    counts = getattr(args, "processes", None) or (1,)
    if len(counts) > 1:
        raise BenchError(f"--processes {args.processes}: one count for a run (calibrate climbs "
                         "several)")  # fmt: skip
    processes = counts[0]
    if processes > MAX_PROCESSES:
        raise BenchError(f"--processes {processes}: 1 to {MAX_PROCESSES}")
    calibration = None
    if getattr(args, "calibration", None):
        try:
            data = _json.loads(Path(args.calibration).read_text())
            calibration = {**data["ceiling"], "by_processes": data.get("by_processes") or {}}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BenchError(
                f"--calibration {args.calibration}: not a calibration file ({exc})"
            ) from None
    return RunConfig(
        base_url=args.url.rstrip("/"),
        model=args.model,
        api=args.api,
        send_ids=not args.send_text,
        flush=not args.no_flush,
        ignore_eos=args.ignore_eos,
        page_size=args.page_size,
        progress=not args.no_progress,
        warmup=args.warmup,
        api_key=args.api_key,
        audit_tolerance=args.audit_tolerance,
        calibration=calibration,
        processes=processes,
    )


def one_line_errors(func):
    """A run that cannot start (server unreachable, workload too long for its context) ends in
    one line on stderr and exit status 2, not a traceback."""
    import functools

    if getattr(func, "one_line_errors", False):
        return func

    @functools.wraps(func)
    def wrapper(args) -> int:
        from sglang_mx.bench.load.limits import BenchError

        try:
            return func(args)
        except BenchError as exc:  # a bad claim file says one line per bad field
            for line in str(exc).splitlines():
                print(f"sglang-mx bench: {line}", file=sys.stderr)
            return 2
        except OSError as exc:  # a result, trace or claim file that cannot be read or written
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"sglang-mx bench: {where}{exc.strerror or exc}", file=sys.stderr)
            return 2
        except json.JSONDecodeError as exc:
            print(f"sglang-mx bench: not JSON ({exc})", file=sys.stderr)
            return 2

    wrapper.one_line_errors = True
    return wrapper
