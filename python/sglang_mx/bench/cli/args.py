"""The run flags and their readers that `bench run`, `sweep`, `verify` and `calibrate` share:
kept apart from verbs.py so those commands' modules import them without importing the CLI."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sglang_mx.capacity.flags import OldSpelling

MAX_PROCESSES = 64  # load worker processes (loadgen.py)


def add_slo_args(p: argparse.ArgumentParser, ttft_default: float | None) -> None:
    """The SLO flags, one name each across bench and plan: --slo-ttft (old: --slo), --slo-tpot,
    --slo-itl, --slo-e2e, --slo-percentile."""
    p.add_argument("--slo-ttft", dest="slo", type=float, default=ttft_default, metavar="S",
                   help="TTFT limit in seconds at --slo-percentile")  # fmt: skip
    p.add_argument("--slo", dest="slo", type=float, action=OldSpelling, new="--slo-ttft",
                   help=argparse.SUPPRESS)  # fmt: skip
    p.add_argument("--slo-tpot", type=float, help="TPOT SLO in seconds (per-request TPOT)")
    p.add_argument("--slo-itl", type=float, help="ITL SLO in seconds (every inter-token gap)")
    p.add_argument("--slo-e2e", type=float, help="end-to-end latency SLO in seconds")
    p.add_argument("--slo-percentile", type=int, default=95 if ttft_default else None,
                   choices=(50, 90, 95, 99))  # fmt: skip


def run_args(
    p: argparse.ArgumentParser, slo_default: float | None = 5.0, endpoint_required: bool = True
) -> None:
    """The flags of a run against an endpoint; `endpoint_required=False` leaves --url and
    --tokenizer to the command (verify --check needs neither)."""
    p.add_argument("--url", required=endpoint_required,
                   help="base URL of an OpenAI-compatible server")  # fmt: skip
    p.add_argument("--tokenizer", required=endpoint_required,
                   help="model dir or tokenizer.json (offline)")  # fmt: skip
    p.add_argument("--model", help="model name to request (default: first of /v1/models)")
    p.add_argument("--api", choices=("completions", "chat"), default="completions")
    p.add_argument("--send-text", action="store_true", help="send decoded text, not token ids")
    p.add_argument("--no-flush", action="store_true")
    p.add_argument("--no-ignore-eos", action="store_true")
    p.add_argument("--page-size", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2, help="unmeasured requests sent first")
    p.add_argument("--api-key")
    add_slo_args(p, slo_default)
    p.add_argument("--hardware", help="hardware under test, e.g. MI355X (sets $/GPU-h)")
    p.add_argument("--gpus", type=int, help="GPUs serving the endpoint (default: a node)")
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
    p.add_argument(
        "--processes",
        type=int,
        help="load worker processes sharing one clock (default 1; bench verify: as many as "
        "the claim's rate needs by --calibration)",
    )


def slo_from_args(args):
    """The whole SLO the run flags state (metrics.Slo): each limit is both the run's percentile
    gate and the per-request goodput limit."""
    from sglang_mx.measure.metrics import Slo

    return Slo(
        ttft_p95_s=args.slo,
        ttft_s=args.slo,
        tpot_s=args.slo_tpot,
        itl_s=args.slo_itl,
        e2e_s=args.slo_e2e,
        percentile=args.slo_percentile,
    )


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

    processes = getattr(args, "processes", None)
    processes = 1 if processes is None else processes
    if processes < 1 or processes > MAX_PROCESSES:
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
        ignore_eos=not args.no_ignore_eos,
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
