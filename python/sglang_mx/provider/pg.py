"""The shared store's connection: PostgreSQL through psycopg 3, one connection per store and a
lock around use, the same execute / write / transaction surface as the SQLite `db.Database`
(`?` placeholders, rewritten to psycopg's `%s`).

Why psycopg 3, called synchronously: the provider's settlement path is synchronous (a relay
settles its rows in a `finally`, `context.Settlement`), and each request-path write is one call
of a server-side function (migrations/postgresql/0002_functions.sql), so the driver's job is one
round trip over the Unix socket or TCP. Measured on this box (benchmark/provider_pg_driver.py,
docs/results/provider-pg.json): psycopg 3 in the event loop's thread is the fastest of the three
per call; asyncpg and psycopg's async connection add an event-loop hand-off per call and would
make settlement asynchronous everywhere.

A lost connection (PostgreSQL restarted, a network cut) raises `StoreUnavailable`, which the
provider answers with a 503; the next call reconnects."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from functools import lru_cache

import psycopg
from psycopg.types.numeric import FloatLoader

from sglang_mx.provider.errors import StoreUnavailable

CONNECT_TIMEOUT_S = 3
_LOST = (psycopg.OperationalError, psycopg.InterfaceError)  # server gone, connection closed


@lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class _PgTx:
    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        cur = self.conn.execute(_pg_sql(sql), params)
        return cur.fetchall() if cur.description else []

    def write(self, sql: str, params: tuple = ()) -> int:
        return self.conn.execute(_pg_sql(sql), params).rowcount

    def script(self, sql: str) -> None:
        self.conn.execute(sql)  # no parameters: the simple protocol, several statements


class PgDatabase:
    dialect = "postgresql"

    @staticmethod
    def money(value: float | None) -> Decimal | None:
        """An amount as the NUMERIC its float prints as: no binary residue summed into spend."""
        return None if value is None else Decimal(repr(float(value)))

    def __init__(self, url: str, synchronous_commit: bool = False) -> None:
        """synchronous_commit False (the default on the request path): a commit returns once
        its WAL is written, not flushed; a PostgreSQL crash or power loss can lose the last
        ~0.6 s of commits (3 x wal_writer_delay), a clean restart loses nothing. That is the
        embedded store's promise too (SQLite WAL, synchronous=NORMAL). True: every commit waits
        for its fsync (2.7 ms p50 per commit on the development box)."""
        self.url = url
        self.synchronous_commit = synchronous_commit
        self.lock = threading.Lock()
        self.conn: psycopg.Connection | None = None
        with self.lock:
            self._connection()

    def _connection(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed or self.conn.broken:
            try:
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            except psycopg.OperationalError as e:
                raise StoreUnavailable(f"cannot connect to the database: {e}") from e
            conn.adapters.register_loader("numeric", FloatLoader)
            if not self.synchronous_commit:
                conn.execute("SET synchronous_commit = off")
            self.conn = conn
        return self.conn

    def _run(self, fn):
        with self.lock:
            conn = self._connection()
            try:
                return fn(conn)
            except _LOST as e:
                raise StoreUnavailable(f"database error: {e}") from e

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self._run(lambda c: _PgTx(c).execute(sql, params))

    def write(self, sql: str, params: tuple = ()) -> int:
        return self._run(lambda c: _PgTx(c).write(sql, params))

    def executescript(self, sql: str) -> None:
        self._run(lambda c: c.execute(sql))

    @contextmanager
    def transaction(self, exclusive: bool = True) -> Iterator[_PgTx]:
        with self.lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    yield _PgTx(conn)
            except _LOST as e:
                raise StoreUnavailable(f"database error: {e}") from e

    def stop_checkpointer(self) -> None:
        """Nothing to stop: PostgreSQL checkpoints on its own."""

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
