"""Versioned schema migrations, kept as data: `migrations/<dialect>/NNNN_name.sql`, applied in
order, each once, recorded in `schema_migrations`; those one run applies share a transaction
(all or none). Every store
opened by the provider or its CLI migrates first, so `sglang-mx provider db migrate` is only
needed to do it ahead of a rollout; running it again changes nothing.

On PostgreSQL the runner holds an advisory lock while it works, so replicas starting together
apply each migration once; on SQLite `BEGIN IMMEDIATE` does the same."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
LOCK_ID = 5_700_057  # pg_advisory_lock key of the migration runner

_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied DOUBLE PRECISION NOT NULL)"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available(dialect: str) -> list[Migration]:
    folder = resources.files("sglang_mx.provider") / "migrations" / dialect
    out = []
    for entry in folder.iterdir():
        m = _NAME.match(entry.name)
        if m:
            out.append(Migration(int(m.group(1)), m.group(2), entry.read_text()))
    out.sort(key=lambda m: m.version)
    versions = [m.version for m in out]
    if versions != list(range(1, len(out) + 1)):
        raise RuntimeError(f"migrations/{dialect}: versions {versions} are not 1..N")
    return out


def applied(db) -> list[int]:
    return [r[0] for r in db.execute("SELECT version FROM schema_migrations ORDER BY version")]


def migrate(db) -> list[Migration]:
    """Apply what `db` (a db.Database or pg.PgDatabase) lacks; returns what was applied."""
    done: list[Migration] = []
    with db.transaction(exclusive=True) as tx:
        if db.dialect == "postgresql":
            tx.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_ID,))
        tx.execute(_TABLE)
        have = {r[0] for r in tx.execute("SELECT version FROM schema_migrations")}
        for m in available(db.dialect):
            if m.version in have:
                continue
            tx.script(m.sql)
            tx.execute(
                "INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)",
                (m.version, m.name, time.time()),
            )
            done.append(m)
    return done
