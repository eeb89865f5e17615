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

The request path's two calls (`call`) skip psycopg's cursor layer: a statement prepared once per
connection and run by libpq itself, parameters and results as text. psycopg's `execute` of the
same prepared statement costs ~90 us more per call on this box (111 vs 20 us p50 for a
one-parameter SELECT, 70 vs 13 us of CPU; 2026-12-06), a tenth of the provider's 2 ms budget
per request.

A lost connection (PostgreSQL restarted, a network cut) raises `StoreUnavailable`, which the
provider answers with a 503; the next call reconnects."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from functools import lru_cache

import psycopg
from psycopg import pq
from psycopg.types.numeric import FloatLoader

from sglang_mx.provider.errors import StoreUnavailable

CONNECT_TIMEOUT_S = 3
ROLLBACK_RETRIES = 2  # a request-path call rolled back as a deadlock victim, run again
_LOST = (psycopg.OperationalError, psycopg.InterfaceError)  # server gone, connection closed


@lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


def _text(value: object) -> bytes | None:
    """A parameter in PostgreSQL's text format: None is NULL, a list a text array."""
    if value is None:
        return None
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, list | tuple):
        quoted = ('"' + str(x).replace("\\", "\\\\").replace('"', '\\"') + '"' for x in value)
        return ("{" + ",".join(quoted) + "}").encode()
    return str(value).encode()


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
        self._prepared: set[bytes] = set()  # on self.conn
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
            self.conn, self._prepared = conn, set()
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

    def call(self, name: str, sql: str, params: tuple) -> list[tuple[str | None, ...]]:
        """One statement (`$n` placeholders) prepared as `name` on first use, run by libpq with
        the parameters as text (`_text`); its rows as text (None for NULL). A statement that
        PostgreSQL rolled back as a deadlock or serialization victim (SQLSTATE class 40: it
        changed nothing) is run again, up to ROLLBACK_RETRIES times, before it is a 503."""
        for attempt in range(ROLLBACK_RETRIES + 1):
            try:
                return self._call(name, sql, params)
            except StoreUnavailable as e:
                state = getattr(e.__cause__, "sqlstate", None) or ""
                if attempt == ROLLBACK_RETRIES or not state.startswith("40"):
                    raise
        raise AssertionError("unreachable")

    def _call(self, name: str, sql: str, params: tuple) -> list[tuple[str | None, ...]]:
        with self.lock:
            pgconn = self._connection().pgconn
            try:
                stmt = name.encode()
                if stmt not in self._prepared:
                    prepared = pgconn.prepare(stmt, sql.encode())
                    self._check(pgconn, prepared, pq.ExecStatus.COMMAND_OK)
                    self._prepared.add(stmt)
                res = pgconn.exec_prepared(stmt, [_text(v) for v in params])
                self._check(pgconn, res, pq.ExecStatus.TUPLES_OK)
            except _LOST as e:
                raise StoreUnavailable(f"database error: {e}") from e
            cols = range(res.nfields)
            rows = []
            for i in range(res.ntuples):
                values = (res.get_value(i, j) for j in cols)
                rows.append(tuple(None if v is None else v.decode() for v in values))
            return rows

    @staticmethod
    def _check(pgconn: pq.abc.PGconn, res: pq.abc.PGresult, ok: pq.ExecStatus) -> None:
        if res.status == ok:
            return
        if pgconn.status == pq.ConnStatus.BAD:
            msg = (res.error_message or pgconn.error_message).decode(errors="replace").strip()
            raise StoreUnavailable(f"database error: {msg or 'connection lost'}")
        raise psycopg.errors.error_from_result(res)

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
