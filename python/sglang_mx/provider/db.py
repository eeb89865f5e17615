"""One SQLite connection per store, WAL mode, a lock around use: safe from the event loop and
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


class Database:
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
            if self.checkpointer is not None:
                self._commits += 1
                if self._commits >= CHECKPOINT_EVERY:
                    self._commits = 0
                    self.checkpointer.wanted.set()
        return changed

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
