"""Entry point of the `sglang-mx` command. Subcommand modules are imported here and stay light
(no torch/sglang at import time) so `--help` is quick."""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> module exposing register(subparsers); each sets `func` (and `passthrough` if it accepts
# arbitrary trailing SGLang server arguments).
SUBCOMMANDS = {
    "serve": "sglang_mx.cli.serve",
    "recipe": "sglang_mx.cli.recipe",
    "quantize": "sglang_mx.cli.quantize",
    "info": "sglang_mx.cli.info",
    "provider": "sglang_mx.provider.cli",
    "keys": "sglang_mx.provider.keys_cli",
    "bench": "sglang_mx.bench.cli.verbs",
    "roofline": "sglang_mx.capacity.cli",
    "plan": "sglang_mx.plan.cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglang-mx",
        description="SGLang + MXFP4 MoE kernels: serve, quantize, inspect, sell, benchmark.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in SUBCOMMANDS.values():
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passthrough", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
