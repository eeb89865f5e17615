"""`sglang-mx bench gen`: write the workload's seeded JSONL trace."""

from __future__ import annotations

import argparse

from sglang_mx.bench.cli.args import spec_from_args, workload_args


def _cmd_gen(args) -> int:
    from sglang_mx.measure.tracegen import generate

    trace = generate(spec_from_args(args))
    path = trace.save(args.out)
    print(
        f"{path}: {len(trace.requests)} requests, shared prefix {trace.prefix_len} tokens, "
        f"designed hit rate {trace.predicted_hit_rate:.4f}"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("gen", help="write a seeded JSONL trace")
    workload_args(p)
    p.add_argument("-o", "--out", default="trace.jsonl")
    p.set_defaults(func=_cmd_gen)
