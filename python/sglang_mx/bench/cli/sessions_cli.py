"""`sglang-mx bench sessions TRACE --url URL`: replay multi-turn agent sessions (sessions.py),
each turn built on the answer the server gave, and print the cached fraction by turn."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cmd(args) -> int:
    from sglang_mx.bench.load import sessions as S
    from sglang_mx.bench.load.limits import BenchError
    from sglang_mx.measure.stamp import stamp

    todo = S.load_any(args.trace, args.trace_format, args.max_sessions, args.gap_s)
    extra = {"temperature": args.temperature}
    if args.ignore_eos:
        extra["ignore_eos"] = True  # SGLang's and vLLM's extension: every turn its full length
    url = args.url.rstrip("/")
    records = S.replay(url, todo, args.model, args.api_key, extra)
    summ = S.summary(records)
    print("turn  sessions  failed  prompt tokens  cached fraction  TTFT s")
    for row in summ["turns"]:
        cells = [_fmt(row["prompt_tokens"], ".0f"), _fmt(row["cached_fraction"], ".3f"),
                 _fmt(row["ttft_s"], ".3f")]  # fmt: skip
        print(f"{row['turn']:>4}  {row['sessions']:>8}  {row['failed']:>6}  {cells[0]:>13}  "
              f"{cells[1]:>15}  {cells[2]:>6}")  # fmt: skip
    out = Path(args.out)
    config = {"url": url, "trace": str(args.trace), "format": args.trace_format,
              "sessions": len(todo), **extra}  # fmt: skip
    rows = [dataclasses.asdict(r) | {"cached_fraction": r.cached_fraction} for r in records]
    out.write_text(json.dumps({"stamp": stamp(None, config), "summary": summ, "turns": rows},
                              indent=1) + "\n")  # fmt: skip
    print(f"wrote {out}")
    if summ["failed"]:
        raise BenchError(f"{summ['failed']} turn(s) failed; first: "
                         f"{next(r.error for r in records if r.error)}")  # fmt: skip
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from sglang_mx.bench.cli.args import (
        api_key_arg,
        ignore_eos_arg,
        model_arg,
        trace_format_arg,
        url_arg,
    )
    from sglang_mx.capacity.flags import OldSpelling

    p = subparsers.add_parser(
        "sessions", help="replay multi-turn agent sessions (cached fraction by turn)"
    )
    p.add_argument("trace", help="session JSONL (benchmark/traces/agent-sessions-sample.jsonl) or "
                   "ShareGPT JSON")  # fmt: skip
    url_arg(p)
    trace_format_arg(p)
    p.add_argument("--format", dest="trace_format", action=OldSpelling, new="--trace-format",
                   help=argparse.SUPPRESS)  # fmt: skip
    model_arg(p)
    api_key_arg(p)
    p.add_argument("--max-sessions", type=int, help="the first N sessions only")
    p.add_argument("--gap-s", type=float, default=0.0, help="ShareGPT: seconds between starts")
    p.add_argument("--temperature", type=float, default=0.0)
    ignore_eos_arg(p, False)
    p.add_argument("-o", "--out", default="sessions.json")
    p.set_defaults(func=_cmd)
