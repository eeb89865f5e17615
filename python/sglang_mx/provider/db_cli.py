"""`sglang-mx provider db migrate|import`: bring a store's schema up to date (idempotent), and
move an embedded SQLite store into an empty PostgreSQL one with its counts and sums checked."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglang_mx.provider.action_parsers import action_group, store_action

HELP = "manage the provider's store (schema migrations, SQLite -> PostgreSQL import)"


def register(subparsers: argparse._SubParsersAction) -> None:
    group = action_group(subparsers, "db", HELP)
    store_action(group, "migrate", "apply the schema migrations the store lacks", _migrate)
    i = store_action(
        group,
        "import",
        "copy an SQLite store into an empty PostgreSQL one",
        _import,
        db_help="the target: a postgresql:// URL",
    )
    i.add_argument("--from", dest="source", required=True, type=Path, help="the SQLite file")


def _migrate(args: argparse.Namespace) -> int:
    from sglang_mx.provider.db import Database, is_url
    from sglang_mx.provider.migrate import applied, migrate

    if is_url(args.db):
        from sglang_mx.provider.pg import PgDatabase

        db = PgDatabase(args.db, synchronous_commit=True)
    else:
        db = Database(args.db)
    done = migrate(db)
    for m in done:
        print(f"applied {m.version:04d}_{m.name}")
    print(f"schema at version {max(applied(db), default=0)} ({len(done)} applied now)")
    db.close()
    return 0


def _import(args: argparse.Namespace) -> int:
    from sglang_mx.provider.db import is_url, open_database
    from sglang_mx.provider.store_import import ImportRefused, import_sqlite

    if not is_url(args.db):
        print("sglang-mx: error: --db must be a postgresql:// URL", file=sys.stderr)
        return 2
    target = open_database(args.db, synchronous_commit=True)
    try:
        report = import_sqlite(args.source, target)
    except ImportRefused as e:
        print(f"sglang-mx: error: {e}", file=sys.stderr)
        return 1
    finally:
        target.close()
    print(f"imported {report.keys} keys and {report.rows} ledger rows ({report.cost} USD)")
    print(f"{'key':10} {'rows':>8} {'tokens':>12} {'cost_usd':>16}")
    for key_id, (rows, tokens, cost) in sorted(report.per_key.items()):
        print(f"{key_id:10} {rows:8d} {tokens:12d} {cost:>16}")
    print("checked: counts, tokens and cost per key read back equal to the file's")
    return 0
