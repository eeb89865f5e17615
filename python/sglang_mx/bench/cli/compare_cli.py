"""`sglang-mx bench compare A B`: a head-to-head table of two result.json files, each at its
knee (or its last point)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


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


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compare", help="head-to-head table of two result.json files")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--labels", help="two comma-separated names")
    p.add_argument("-o", "--out", help="also write the markdown table here")
    p.set_defaults(func=_cmd_compare)
