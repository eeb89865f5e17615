"""Spend ledger: one row per request, inserted as `pending` before the upstream call (holding
the request's worst-case cost as a reservation against its key's cap), advanced while tokens
stream, finalized with the tokens actually produced. Each row is settled once, whoever tries:
rows left pending by a crash are finalized from what was last recorded, at start-up on the
embedded store (one process owns it), by the replicas' sweep on the shared one (`replicas`:
only rows of a replica whose lease lapsed)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sglang_mx.provider.db import open_database
from sglang_mx.provider.generations import GenerationStats

# Final states: ok, error (upstream failed), aborted (client left, or its replica died
# mid-request), recovered (the embedded store's process crashed mid-request).
FINAL_STATUSES = ("ok", "error", "aborted", "recovered")
_COLUMNS = (
    "id, key_id, model, status, prompt_tokens, completion_tokens, cached_tokens, cost, created, "
    "finished, error, reserved, replica"
)


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
    reserved: float = 0.0  # USD held against the key's cap while pending
    replica: str | None = None  # the provider process serving it (shared store)


class Ledger:
    def __init__(self, target: str | Path | object, background_checkpoint: bool = False) -> None:
        """target: an SQLite path, a PostgreSQL URL or an open database (db.open_database)."""
        self.db = open_database(target, background_checkpoint)
        self.shared = self.db.dialect == "postgresql"

    def start(self, request_id: str, key_id: str, model: str, prompt_tokens: int = 0) -> None:
        self.db.write(
            "INSERT INTO ledger (id, key_id, model, status, prompt_tokens, created) "
            "VALUES (?, ?, ?, 'pending', ?, ?)",
            (request_id, key_id, model, prompt_tokens, time.time()),
        )

    def open(
        self,
        rows: list[str],
        key_id: str,
        model: str,
        reserve_each: float = 0.0,
        limit_usd: float | None = None,
        replica: str | None = None,
    ) -> tuple[float, float] | None:
        """Insert `rows` pending, each holding `reserve_each` USD against the key's cap, in one
        transaction; None when done, else (spent, reserved) of the key and nothing written:
        spent + reserved + this request's reservation would pass `limit_usd`."""
        money = self.db.money
        if self.shared:
            ok, spent, reserved = self.db.execute(
                "SELECT * FROM mx_open(?, ?, ?, ?, ?, ?)",
                (rows, key_id, model, replica, money(reserve_each), money(limit_usd)),
            )[0]
            return None if ok else (spent, reserved)
        total = reserve_each * len(rows)
        now = time.time()
        with self.db.transaction() as tx:
            tx.write(
                "INSERT INTO key_balance (key_id) VALUES (?) ON CONFLICT DO NOTHING", (key_id,)
            )
            spent, reserved = tx.execute(
                "SELECT spent, reserved FROM key_balance WHERE key_id=?", (key_id,)
            )[0]
            if limit_usd is not None and spent + reserved + total > limit_usd:
                return spent, reserved
            tx.write(
                "UPDATE key_balance SET reserved = reserved + ? WHERE key_id=?", (total, key_id)
            )
            for row in rows:
                tx.write(
                    "INSERT INTO ledger (id, key_id, model, status, created, reserved, replica) "
                    "VALUES (?, ?, ?, 'pending', ?, ?, ?)",
                    (row, key_id, model, now, reserve_each, replica),
                )
        return None

    def admit_open(
        self,
        admission: tuple[int, int, int],
        rows: list[str],
        key_id: str,
        model: str,
        reserve_each: float,
        limit_usd: float | None,
        replica: str | None,
    ) -> tuple[float, tuple[float, float] | None]:
        """Shared store: `admission` (rpm, tpm, requests) against the key's window, then `open`,
        in one round trip. (wait, None): wait > 0 seconds until admitted, nothing written; else
        (0, what `open` returns)."""
        assert self.shared, "the embedded store admits in process (ratelimit.RateLimiter)"
        money = self.db.money
        wait, ok, spent, reserved = self.db.call(
            "mx_admit_open_1",
            "SELECT * FROM mx_admit_open($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            (*admission, rows, key_id, model, replica, money(reserve_each), money(limit_usd)),
        )[0]
        if float(wait) > 0:
            return float(wait), None
        return 0.0, None if ok == "t" else (float(spent), float(reserved))

    def balance(self, key_id: str) -> tuple[float, float]:
        """(spent, reserved): USD the key's settled rows cost and its pending rows hold."""
        rows = self.db.execute("SELECT spent, reserved FROM key_balance WHERE key_id=?", (key_id,))
        return (float(rows[0][0]), float(rows[0][1])) if rows else (0.0, 0.0)

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
        stats: GenerationStats | None = None,
    ) -> bool:
        """Finalize once, moving the cost into the key's spend and releasing the row's
        reservation; a second call (or one after recovery) changes nothing. `stats` (the
        generation lookup's row) are written in the same transaction; the first stand."""
        assert status in FINAL_STATUSES, status
        assert stats is None or stats.id == request_id, (stats, request_id)
        if self.shared:
            args = (request_id, status, prompt, completion, cached, self.db.money(cost), error)
            if stats is None:
                return self.db.execute("SELECT mx_finish(?, ?, ?, ?, ?, ?, ?)", args)[0][0]
            return (
                self.db.call(
                    "mx_settle_1",
                    "SELECT mx_settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                    args + stats.values(),
                )[0][0]
                == "t"
            )
        with self.db.transaction() as tx:
            if stats is not None:
                tx.write(
                    "INSERT INTO generation_stats (id, api_type, streamed, finish_reason, "
                    "native_finish_reason, reasoning_tokens, generation_ms) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (request_id, *stats.values()),
                )
            held = tx.execute(
                "UPDATE ledger SET status=?, prompt_tokens=?, completion_tokens=?, "
                "cached_tokens=?, cost=?, finished=?, error=? WHERE id=? AND status='pending' "
                "RETURNING key_id, reserved",
                (status, prompt, completion, cached, cost, time.time(), error, request_id),
            )
            if not held:
                return False
            key_id, reserved = held[0]
            tx.write(
                "INSERT INTO key_balance (key_id, spent, reserved) VALUES (?, ?, ?) "
                "ON CONFLICT (key_id) DO UPDATE SET spent = spent + excluded.spent, "
                "reserved = reserved + excluded.reserved",
                (key_id, cost, -reserved),
            )
        return True

    def recover(self, cost_of: Callable[[str, int, int, int], float]) -> int:
        """Embedded store: finalize every row a previous process left pending, billing the
        tokens recorded. Never on the shared store, where pending rows may be a live replica's
        (settle_orphans)."""
        assert not self.shared, "the shared store settles only dead replicas' rows"
        rows = self.db.execute(
            "SELECT id, model, prompt_tokens, completion_tokens, cached_tokens FROM ledger "
            "WHERE status='pending'"
        )
        return self._settle(rows, cost_of, "recovered", "provider restarted mid-request")

    def settle_orphans(self, cost_of: Callable[[str, int, int, int], float], lease_s: float) -> int:
        """Shared store: settle the pending rows of replicas known dead (stopped, or no
        heartbeat for `lease_s` while the database itself was up: a database restart does not
        make every replica look dead; rows of no known replica too) as `aborted`, billing the tokens
        last recorded (at most ledger_flush_tokens behind what was delivered: never more than
        was delivered). Safe from any number of replicas at once: each row settles once."""
        rows = self.db.execute(
            "SELECT l.id, l.model, l.prompt_tokens, l.completion_tokens, l.cached_tokens, "
            "l.replica FROM ledger l LEFT JOIN replicas r ON r.id = l.replica "
            "WHERE l.status = 'pending' AND (r.id IS NULL OR r.stopped IS NOT NULL "
            "OR (r.heartbeat < mx_now() - ? "
            "AND extract(epoch FROM pg_postmaster_start_time()) < mx_now() - ?))",
            (lease_s, lease_s),
        )
        settled = 0
        for rid, model, prompt, completion, cached, replica in rows:
            why = f"replica {replica} died mid-request; billed the tokens last recorded"
            settled += self._settle([(rid, model, prompt, completion, cached)], cost_of,
                                    "aborted", why)  # fmt: skip
        return settled

    def _settle(self, rows, cost_of, status: str, error: str) -> int:
        settled = 0
        for rid, model, prompt, completion, cached in rows:
            cost = cost_of(model, prompt, completion, cached)
            settled += self.finish(rid, status, prompt, completion, cached, cost, error=error)
        return settled

    def spend(self, key_id: str) -> float:
        return float(
            self.db.execute("SELECT COALESCE(SUM(cost), 0) FROM ledger WHERE key_id=?", (key_id,))[
                0
            ][0]
        )

    def get(self, request_id: str) -> LedgerRow | None:
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM ledger WHERE id=?", (request_id,))
        return LedgerRow(*rows[0]) if rows else None

    def rows(self, key_id: str | None = None) -> list[LedgerRow]:
        if key_id is None:
            q = f"SELECT {_COLUMNS} FROM ledger ORDER BY created"
            return [LedgerRow(*r) for r in self.db.execute(q)]
        q = f"SELECT {_COLUMNS} FROM ledger WHERE key_id=? ORDER BY created"
        return [LedgerRow(*r) for r in self.db.execute(q, (key_id,))]
