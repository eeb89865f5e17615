"""One SQLite connection per store, WAL mode, a lock around use: safe from the event loop and
from worker threads, durable across restarts and crashes."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class Database:
    def __init__(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL loses at most the last transactions on power loss, never on a process crash.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.lock = threading.Lock()

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def executescript(self, sql: str) -> None:
        with self.lock:
            self.conn.executescript(sql)

    def close(self) -> None:
        with self.lock:
            self.conn.close()
