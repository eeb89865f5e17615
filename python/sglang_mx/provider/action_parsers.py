"""How `sglang-mx provider keys|db` declare their actions: a parser per group whose action is
required, and an action parser that names the store it works on (--db) and the function it runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable

STORE_HELP = "SQLite file or postgresql:// URL"


def action_group(
    subparsers: argparse._SubParsersAction, name: str, help_: str
) -> argparse._SubParsersAction:
    """`NAME ACTION`: the parser `name` and its subparsers (one ACTION required, stored as
    `<name>_command`)."""
    p = subparsers.add_parser(name, help=help_)
    return p.add_subparsers(dest=f"{name}_command", metavar="ACTION", required=True)


def store_action(
    group: argparse._SubParsersAction,
    name: str,
    help_: str,
    func: Callable[[argparse.Namespace], int],
    db_help: str = STORE_HELP,
) -> argparse.ArgumentParser:
    """The action `name`: its parser takes the store (--db, required) and runs `func`; the
    caller adds the action's other arguments."""
    p = group.add_parser(name, help=help_)
    p.add_argument("--db", required=True, help=db_help)
    p.set_defaults(func=func)
    return p
