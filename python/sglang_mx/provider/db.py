"""The embedded store (`Database`: SQLite) and `open_database`, which opens whichever store a
`--db` names: an SQLite file, or a PostgreSQL URL (`pg.PgDatabase`, the shared store of several
replicas). Both take `?` placeholders and offer execute / write / transaction.

One SQLite connection per store, WAL mode, a lock around use: safe from the event loop and
from worker threads, durable across restarts and crashes.

A store written on the request path (the ledger) checkpoints from a background thread: SQLite's
automatic checkpoint runs inside whichever commit crosses 1,000 WAL pages, copies them and fsyncs
twice there, which stalled the event loop 3-60 ms every ~100 requests on the development box.
The thread checkpoints every CHECKPOINT_EVERY commits, not on a timer: the first commit after a
complete checkpoint restarts the WAL and fsyncs its header (SQLite, synchronous=NORMAL), so a
timer would put that fsync on nearly every request at low request rates."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHECKPOINT_EVERY = 256  # commits; ~1,000 WAL pages of ledger rows, like SQLite's default


def _connect(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL loses at most the last transactions on power loss, never on a process crash.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class _Checkpointer(threading.Thread):
    """PASSIVE checkpoints on its own connection when asked: never waits for, nor blocks, the
    writer."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(name=f"sqlite-checkpoint:{Path(path).name}", daemon=True)
        self.conn = _connect(path)
        self.wanted = threading.Event()
        self.stopped = False
        self.runs = 0

    def run(self) -> None:
        while True:
            self.wanted.wait()
            self.wanted.clear()
            self.checkpoint()
            if self.stopped:
                break
        self.conn.close()

    def checkpoint(self) -> None:
        try:
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.runs += 1
        except sqlite3.Error:
            pass  # busy or closing: the next interval retries; the WAL stays valid meanwhile


def is_url(target: object) -> bool:
    """A PostgreSQL URL (the shared store) rather than an SQLite file path."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def open_database(target, background_checkpoint: bool = False, **pg_options):
    """The store `target` names: an open database (returned as is), a PostgreSQL URL
    (`pg.PgDatabase`) or an SQLite file path (`Database`); migrated to the current schema."""
    from sglang_mx.provider.migrate import migrate

    if isinstance(target, Database) or hasattr(target, "dialect"):
        return target
    if is_url(target):
        from sglang_mx.provider.pg import PgDatabase

        db = PgDatabase(target, **pg_options)
    else:
        db = Database(target, background_checkpoint)
    migrate(db)
    return db


class _SqliteTx:
    """Statements inside one `Database.transaction()`."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.conn.execute(sql, params).fetchall()

    def write(self, sql: str, params: tuple = ()) -> int:
        return self.conn.execute(sql, params).rowcount

    def script(self, sql: str) -> None:
        """Several statements, inside the transaction (sqlite3's executescript would commit)."""
        stmt = ""
        for line in sql.splitlines(keepends=True):
            stmt += line
            if sqlite3.complete_statement(stmt):
                self.conn.execute(stmt)
                stmt = ""


class Database:
    dialect = "sqlite"

    @staticmethod
    def money(value: float | None) -> float | None:
        return value

    def __init__(self, path: str | Path, background_checkpoint: bool = False) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = _connect(path)
        self.lock = threading.Lock()
        self.checkpointer: _Checkpointer | None = None
        self._commits = 0
        if background_checkpoint:
            self.conn.execute("PRAGMA wal_autocheckpoint=0")
            self.checkpointer = _Checkpointer(path)
            self.checkpointer.start()

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def write(self, sql: str, params: tuple = ()) -> int:
        """One statement in its own transaction; returns the rows it changed."""
        with self.lock:
            changed = self.conn.execute(sql, params).rowcount
            self._count_commit()
        return changed

    @contextmanager
    def transaction(self, exclusive: bool = True) -> Iterator[_SqliteTx]:
        """One transaction (BEGIN IMMEDIATE: the write lock up front, so two processes on one
        file serialize instead of failing at commit); rolled back if the block raises."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTx(self.conn)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            self._count_commit()

    def _count_commit(self) -> None:
        if self.checkpointer is not None:
            self._commits += 1
            if self._commits >= CHECKPOINT_EVERY:
                self._commits = 0
                self.checkpointer.wanted.set()

    def executescript(self, sql: str) -> None:
        with self.lock:
            self.conn.executescript(sql)

    def stop_checkpointer(self) -> None:
        """One last checkpoint, then the thread ends (writes stay possible: SQLite's own
        checkpoint on close covers the rest)."""
        if self.checkpointer is not None:
            self.checkpointer.stopped = True
            self.checkpointer.wanted.set()
            self.checkpointer.join(timeout=10)
            self.checkpointer = None
            with self.lock:
                self.conn.execute("PRAGMA wal_autocheckpoint=1000")

    def close(self) -> None:
        self.stop_checkpointer()
        with self.lock:
            self.conn.close()
