"""Spend ledger: one row per request, inserted as `pending` before the upstream call, advanced
while tokens stream, finalized with the tokens actually produced. Rows left pending by a crash
are finalized at start-up from what was last recorded, so each request is billed once."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sglang_mx.provider.db import Database

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    finished REAL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS ledger_key ON ledger (key_id);
CREATE INDEX IF NOT EXISTS ledger_status ON ledger (status);
"""

# Final states: ok, error (upstream failed), aborted (client left), recovered (crash mid-request).
FINAL_STATUSES = ("ok", "error", "aborted", "recovered")


@dataclass(frozen=True)
class LedgerRow:
    id: str
    key_id: str
    model: str
    status: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost: float
    created: float
    finished: float | None
    error: str | None


class Ledger:
    def __init__(self, path: str | Path, background_checkpoint: bool = False) -> None:
        self.db = Database(path, background_checkpoint)
        self.db.executescript(_SCHEMA)

    def start(self, request_id: str, key_id: str, model: str, prompt_tokens: int = 0) -> None:
        self.db.write(
            "INSERT INTO ledger (id, key_id, model, status, prompt_tokens, created) "
            "VALUES (?, ?, ?, 'pending', ?, ?)",
            (request_id, key_id, model, prompt_tokens, time.time()),
        )

    def progress(self, request_id: str, prompt: int, completion: int, cached: int) -> None:
        self.db.write(
            "UPDATE ledger SET prompt_tokens=?, completion_tokens=?, cached_tokens=? "
            "WHERE id=? AND status='pending'",
            (prompt, completion, cached, request_id),
        )

    def finish(
        self,
        request_id: str,
        status: str,
        prompt: int,
        completion: int,
        cached: int,
        cost: float,
        error: str | None = None,
    ) -> bool:
        """Finalize once; a second call (or one after recovery) changes nothing."""
        assert status in FINAL_STATUSES, status
        changed = self.db.write(
            "UPDATE ledger SET status=?, prompt_tokens=?, completion_tokens=?, "
            "cached_tokens=?, cost=?, finished=?, error=? WHERE id=? AND status='pending'",
            (status, prompt, completion, cached, cost, time.time(), error, request_id),
        )
        return changed == 1

    def recover(self, cost_of: Callable[[str, int, int, int], float]) -> int:
        """Finalize rows a previous process left pending, billing the tokens recorded."""
        rows = self.db.execute(
            "SELECT id, model, prompt_tokens, completion_tokens, cached_tokens FROM ledger "
            "WHERE status='pending'"
        )
        for rid, model, prompt, completion, cached in rows:
            self.finish(
                rid,
                "recovered",
                prompt,
                completion,
                cached,
                cost_of(model, prompt, completion, cached),
                error="provider restarted mid-request",
            )
        return len(rows)

    def spend(self, key_id: str) -> float:
        return float(
            self.db.execute("SELECT COALESCE(SUM(cost), 0) FROM ledger WHERE key_id=?", (key_id,))[
                0
            ][0]
        )

    def get(self, request_id: str) -> LedgerRow | None:
        rows = self.db.execute("SELECT * FROM ledger WHERE id=?", (request_id,))
        return LedgerRow(*rows[0]) if rows else None

    def rows(self, key_id: str | None = None) -> list[LedgerRow]:
        if key_id is None:
            return [LedgerRow(*r) for r in self.db.execute("SELECT * FROM ledger ORDER BY created")]
        q = "SELECT * FROM ledger WHERE key_id=? ORDER BY created"
        return [LedgerRow(*r) for r in self.db.execute(q, (key_id,))]
