"""`sglang-mx bench ledger-export`: the provider's ledger as a replayable trace (lengths, cached
tokens, arrival times; no content)."""

from __future__ import annotations

import argparse


def _cmd_ledger_export(args) -> int:
    from sglang_mx.bench.load.traces_ledger import export_ledger

    n = export_ledger(args.db, args.out, args.since)
    print(f"{args.out}: {n} requests (lengths, cached tokens, arrival times; no content)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("ledger-export", help="the provider ledger as a replayable trace")
    p.add_argument("--db", required=True, help="the provider's SQLite file")
    p.add_argument("-o", "--out", default="ledger.jsonl")
    p.add_argument("--since", type=float, default=0.0, help="only requests from this epoch time")
    p.set_defaults(func=_cmd_ledger_export)
