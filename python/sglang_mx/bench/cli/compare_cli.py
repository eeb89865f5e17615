"""`sglang-mx bench compare A B`: a head-to-head table of two result.json files, each at its
knee (or its last point)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _pick(path: str):
    """A result file's record, and its knee point's summary (or the last point's) as figures,
    with its cost figures."""
    from sglang_mx.bench.report.result import BenchResult

    result = BenchResult.from_dict(json.loads(Path(path).read_text()))
    return result, result.sweep.best().summary.to_dict() | {"cost": result.cost or {}}


def _cmd_compare(args) -> int:
    from sglang_mx.measure.compare import compare, markdown_table

    (a, fa), (b, fb) = _pick(args.a), _pick(args.b)
    labels = (args.labels or f"{a.stamp['hardware']},{b.stamp['hardware']}").split(",")
    table = markdown_table(compare(fa, fb), labels[0], labels[1])
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compare", help="head-to-head table of two result.json files")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--labels", help="two comma-separated names")
    p.add_argument("-o", "--out", help="also write the markdown table here")
    p.set_defaults(func=_cmd_compare)
