"""`python -m sglang_mx.provider {provider [keys],keys} ...`: the same subcommands as `sglang-mx`,
without importing the other subcommands (used by tests and launch recipes)."""

from __future__ import annotations

import argparse
import sys

from sglang_mx.cli.main import new_spelling
from sglang_mx.provider import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sglang_mx.provider")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    cli.register(sub)
    args = parser.parse_args(new_spelling(sys.argv[1:] if argv is None else argv))
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
