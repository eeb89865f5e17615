"""`sglang-mx recipe NAME`: a launch recipe's SGLang flags, one per line (for `mapfile` in
scripts/launch/*.sh); `--cpu` prints what the suite runs on the CPU box and each substitution."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "recipe",
        help="print a launch recipe's SGLang flags (python/sglang_mx/recipes/mi355x.json)",
        description=__doc__,
    )
    p.add_argument("name", nargs="?", help="recipe name (omit to list them)")
    p.add_argument("--cpu", action="store_true", help="the CPU-box scaling and its substitutions")
    p.add_argument("--field", choices=("args", "router", "engines", "gpus_per_engine"),
                   default="args", help="what to print (default: one engine's flags)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sglang_mx import recipes

    if args.name is None:
        for name in recipes.names():
            print(f"{name}: {recipes.recipe(name).about}")
        return 0
    try:
        r = recipes.recipe(args.name)
    except (KeyError, ValueError) as e:
        print(f"sglang-mx recipe: {e.args[0]}", file=sys.stderr)
        return 2
    if args.cpu:
        flags, subs = recipes.cpu_args(args.name)
        print(" ".join(flags))
        for s in subs:
            print(f"  {s.flag}: {s.node or '(absent)'} -> {s.cpu or '(dropped)'}: {s.why}")
        return 0
    value = getattr(r, args.field)
    print("\n".join(value) if isinstance(value, tuple) else value)
    return 0
