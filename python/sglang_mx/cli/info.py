"""`sglang-mx info`: versions, whether the plugin is active, which kernel backend each op uses."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "info",
        help="versions, plugin status and the kernel backend each op uses on this machine",
        description="Report what SGLang would run here: package versions, the sglang_mx entry "
        "points SGLang discovers, the platform it would pick, and the kernel path per op.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sglang_mx.machine_info import collect_info

    info = collect_info()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for section, values in info.items():
        print(f"{section}:")
        for key, value in values.items():
            print(f"  {key:<28} {value}")
    return 0
