"""`sglang-mx bench VERB`: the table of bench's verbs. Each verb is a module here with
`register(subparsers)`, which adds its one parser and sets `func` (the convention of every
level: cli/main.py's SUBCOMMANDS, provider/cli.py's ACTIONS)."""

from __future__ import annotations

import argparse
import importlib

from sglang_mx.bench.cli.args import one_line_errors

VERBS = {
    "gen": "sglang_mx.bench.cli.gen_cli",
    "run": "sglang_mx.bench.cli.run_cli",
    "sweep": "sglang_mx.bench.cli.sweep_cli",
    "verify": "sglang_mx.bench.cli.verify_cli",
    "calibrate": "sglang_mx.bench.cli.calibrate_cli",
    "sessions": "sglang_mx.bench.cli.sessions_cli",
    "ledger-export": "sglang_mx.bench.cli.ledger_export_cli",
    "report": "sglang_mx.bench.cli.report_cli",
    "compare": "sglang_mx.bench.cli.compare_cli",
    "agents": "sglang_mx.bench.cli.agents_cli",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="workload generator, load runner, sweeps, reports")
    verbs = parser.add_subparsers(dest="bench_verb", metavar="VERB", required=True)
    for module in VERBS.values():
        importlib.import_module(module).register(verbs)
    # Every verb ends a run that cannot start in one line on stderr and status 2.
    for sub in verbs.choices.values():
        sub.set_defaults(func=one_line_errors(sub.get_default("func")))
