"""`sglang-mx recipe NAME`: a launch recipe's SGLang flags, one per line (for `mapfile` in
scripts/launch/*.sh); `--cpu` prints what the suite runs on the CPU box and each substitution.
A prefill/decode recipe prints one role's flags (`--role prefill|decode`) or the router's
(`--role router --prefill-url URL --decode-url URL`)."""

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
                   default=None, help="what to print (default: one engine's flags)")  # fmt: skip
    pd = p.add_argument_group("prefill/decode recipes")
    pd.add_argument("--role", choices=("prefill", "decode", "router"), help="which role's flags")
    pd.add_argument("--transfer", help="KV transfer backend (default: the recipe's own)")
    pd.add_argument("--prefill-url", help="--role router: the prefill worker, http://HOST:PORT")
    pd.add_argument("--decode-url", help="--role router: the decode worker, http://HOST:PORT")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"sglang-mx recipe: {message}", file=sys.stderr)
    return 2


def _run_pd(args: argparse.Namespace) -> int:
    from sglang_mx.recipes import pd

    if args.role is None or args.cpu or args.field:
        return _fail(f"{args.name} is a prefill/decode recipe: pass --role prefill|decode|router")
    try:
        if args.role == "router":
            if not (args.prefill_url and args.decode_url):
                return _fail("--role router needs --prefill-url and --decode-url")
            flags = pd.router_args(args.name, args.prefill_url, args.decode_url)
        else:
            flags = pd.role_args(args.name, args.role, args.transfer)
    except (KeyError, ValueError) as e:
        return _fail(e.args[0])
    print("\n".join(flags))
    return 0


def run(args: argparse.Namespace) -> int:
    from sglang_mx import recipes

    if args.name is None:
        for name in recipes.names():
            print(f"{name}: {recipes.recipe(name).about}")
        for name in recipes.pd.names():
            print(f"{name} (--role prefill|decode|router): {recipes.pd.recipe(name).about}")
        return 0
    if args.name in recipes.pd.names():
        return _run_pd(args)
    if args.role or args.transfer or args.prefill_url or args.decode_url:
        return _fail(f"{args.name} is a single-node recipe: --role and its options do not apply")
    try:
        r = recipes.recipe(args.name)
    except (KeyError, ValueError) as e:
        return _fail(e.args[0])
    if args.cpu:
        flags, subs = recipes.cpu_args(args.name)
        print(" ".join(flags))
        for s in subs:
            print(f"  {s.flag}: {s.node or '(absent)'} -> {s.cpu or '(dropped)'}: {s.why}")
        return 0
    value = getattr(r, args.field or "args")
    print("\n".join(value) if isinstance(value, tuple) else value)
    return 0
