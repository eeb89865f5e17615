"""Move an embedded store (an SQLite file) into an empty shared one (PostgreSQL): keys with their
salt (so every key keeps working), every ledger row with its generation stats, and the key
balances derived from them, in one transaction that commits only if the counts and sums read
back from PostgreSQL equal the file's: rows per key and status, tokens, and cost to the last
digit (each REAL cost goes in as the NUMERIC its float prints as, so the sums are compared
exactly).

Rows the file holds `pending` (its process died mid-request) come over pending and of no
replica: the first replica's sweep settles them, billing the tokens they recorded."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

_KEY_COLS = "id, name, digest, created, revoked, rpm, tpm, limit_usd"
_LEDGER_COLS = (
    "id, key_id, model, status, prompt_tokens, completion_tokens, cached_tokens, cost, created, "
    "finished, error"
)
_STATS_COLS = (
    "id, api_type, streamed, finish_reason, native_finish_reason, reasoning_tokens, generation_ms"
)


class ImportRefused(Exception):
    pass


@dataclass(frozen=True)
class ImportReport:
    keys: int
    rows: int
    cost: Decimal
    per_key: dict[str, tuple[int, int, Decimal]]  # key id -> (rows, tokens, cost)


def _dec(x: float | None) -> Decimal | None:
    return None if x is None else Decimal(repr(float(x)))


def _totals(rows: list[tuple]) -> dict[str, tuple[int, int, Decimal]]:
    out: dict[str, tuple[int, int, Decimal]] = {}
    for key_id, prompt, completion, cost in rows:
        n, toks, usd = out.get(key_id, (0, 0, Decimal(0)))
        out[key_id] = (n + 1, toks + int(prompt) + int(completion), usd + Decimal(cost))
    return out


def _stats(src: sqlite3.Connection) -> list[tuple]:
    """The file's generation stats; none in a store older than the table."""
    has = src.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='generation_stats'"
    ).fetchone()
    return src.execute(f"SELECT {_STATS_COLS} FROM generation_stats").fetchall() if has else []


def import_sqlite(source: Path, target) -> ImportReport:
    """Copy `source` into `target` (an open, migrated pg.PgDatabase that holds no keys or
    ledger rows yet); raises ImportRefused, leaving the target unchanged, on any mismatch."""
    if not source.is_file():
        raise ImportRefused(f"{source}: no such SQLite file")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        salt = src.execute("SELECT value FROM meta WHERE name='salt'").fetchone()
        keys = src.execute(f"SELECT {_KEY_COLS} FROM api_keys").fetchall()
        ledger = src.execute(f"SELECT {_LEDGER_COLS} FROM ledger").fetchall()
        stats = _stats(src)
    except sqlite3.Error as e:
        raise ImportRefused(f"{source} is not a provider store: {e}") from e
    finally:
        src.close()
    if salt is None:
        raise ImportRefused(f"{source} has no key salt: not a provider store")
    keys = [(*k[:7], _dec(k[7])) for k in keys]
    ledger = [(*r[:7], _dec(r[7]), *r[8:]) for r in ledger]
    want = _totals([(r[1], r[4], r[5], r[7]) for r in ledger])
    with target.transaction() as tx:
        held = tx.execute("SELECT (SELECT COUNT(*) FROM api_keys), (SELECT COUNT(*) FROM ledger)")
        if held[0] != (0, 0):
            raise ImportRefused(
                f"the target already holds {held[0][0]} keys and {held[0][1]} ledger rows; "
                "import only into an empty store"
            )
        tx.write(
            "INSERT INTO meta (name, value) VALUES ('salt', ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (salt[0],),
        )
        for k in keys:
            tx.write(f"INSERT INTO api_keys ({_KEY_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", k)
        for r in ledger:
            tx.write(
                f"INSERT INTO ledger ({_LEDGER_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", r
            )
        for g in stats:
            tx.write(
                f"INSERT INTO generation_stats ({_STATS_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)", g
            )
        tx.write(
            "INSERT INTO key_balance (key_id, spent) SELECT key_id, SUM(cost) FROM ledger "
            "WHERE status <> 'pending' GROUP BY key_id"
        )
        got = _totals(
            tx.execute("SELECT key_id, prompt_tokens, completion_tokens, cost::text FROM ledger")
        )
        n_keys = tx.execute("SELECT COUNT(*) FROM api_keys")[0][0]
        n_stats = tx.execute("SELECT COUNT(*) FROM generation_stats")[0][0]
        bal = Decimal(tx.execute("SELECT COALESCE(SUM(spent), 0)::text FROM key_balance")[0][0])
        settled = sum((r[7] for r in ledger if r[3] != "pending"), Decimal(0))
        if got != want or n_keys != len(keys) or bal != settled or n_stats != len(stats):
            raise ImportRefused(
                f"read back {n_keys} keys, {sum(v[0] for v in got.values())} rows, "
                f"{n_stats} generation stats, balances {bal} USD; the file has {len(keys)} "
                f"keys, {len(ledger)} rows, {len(stats)} generation stats, {settled} USD "
                "settled: nothing imported"
            )
    total = sum((v[2] for v in want.values()), Decimal(0))
    return ImportReport(len(keys), len(ledger), total, want)
