"""Entry point of the `sglang-mx` command. Subcommand modules are imported here and stay light
(no torch/sglang at import time) so `--help` is quick."""

from __future__ import annotations

import argparse
import importlib
import sys

# `sglang-mx VERB`: name -> module whose register(subparsers) adds that one parser and sets `func`
# (and `passthrough` if it accepts arbitrary trailing SGLang server arguments). A verb with verbs
# of its own keeps their table the same way: bench/cli/verbs.py VERBS, provider/cli.py ACTIONS.
SUBCOMMANDS = {
    "serve": "sglang_mx.cli.serve",
    "recipe": "sglang_mx.cli.recipe",
    "quantize": "sglang_mx.cli.quantize",
    "info": "sglang_mx.cli.info",
    "provider": "sglang_mx.provider.cli",
    "bench": "sglang_mx.bench.cli.verbs",
    "roofline": "sglang_mx.capacity.cli",
    "plan": "sglang_mx.plan.cli",
}

# Old verbs, working until the next release: each is read as its new spelling, with a note.
OLD_VERBS = {"keys": ("provider", "keys")}


def new_spelling(argv: list[str]) -> list[str]:
    """`argv` with an old verb (OLD_VERBS) replaced by its new spelling, saying so on stderr."""
    if argv and argv[0] in OLD_VERBS:
        new = OLD_VERBS[argv[0]]
        print(
            f"sglang-mx: note: `{argv[0]}` is now `{' '.join(new)}` (the old name works until "
            "the next release)",
            file=sys.stderr,
        )
        return [*new, *argv[1:]]
    return argv


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
    args, extra = parser.parse_known_args(new_spelling(sys.argv[1:] if argv is None else argv))
    if extra and not getattr(args, "passthrough", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
