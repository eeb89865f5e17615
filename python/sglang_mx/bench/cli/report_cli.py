"""`sglang-mx bench report`: re-render report.md, report.html and the plots from a result.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _cmd_report(args) -> int:
    from sglang_mx.bench.report.html_page import write_report
    from sglang_mx.bench.report.result import BenchResult

    result = BenchResult.from_dict(json.loads(Path(args.result).read_text()))
    paths = write_report(result, args.out or Path(args.result).parent)
    print("\n".join(str(p) for p in paths.values()))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="re-render report.md and plots from a result.json")
    p.add_argument("result")
    p.add_argument("-o", "--out")
    p.set_defaults(func=_cmd_report)
