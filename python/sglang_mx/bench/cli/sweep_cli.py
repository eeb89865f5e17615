"""`sglang-mx bench sweep`: the workload at each of --rates or --concurrencies; finds the knee."""

from __future__ import annotations

import argparse

from sglang_mx.bench.cli.args import run_args, workload_args
from sglang_mx.bench.cli.run_cli import execute
from sglang_mx.measure.run_flags import add_sweep_args


def _cmd_sweep(args) -> int:
    from sglang_mx.bench.load.limits import BenchError
    from sglang_mx.measure.run_flags import sweep_values

    try:
        kind, values = sweep_values(args)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    return execute(args, kind, values)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sweep", help="request-rate or concurrency sweep; finds the knee")
    workload_args(p)
    run_args(p)
    add_sweep_args(p)
    p.set_defaults(func=_cmd_sweep, trace=None)
