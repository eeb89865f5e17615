"""The store's schema and its move to PostgreSQL: migrations are data applied once (`provider db
migrate` twice changes nothing), an SQLite file from before versioned migrations opens as it
was, and `provider db import --from FILE.sqlite` moves keys (they still authenticate) and every
ledger row with counts and sums equal, refusing a non-empty target. One throwaway PostgreSQL."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from decimal import Decimal

import pytest
from pg_support import cluster, new_database
from sglang_mx.provider.db import open_database
from sglang_mx.provider.generations import GenerationLog, GenerationStats
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger
from sglang_mx.provider.migrate import applied, available


@pytest.fixture(scope="module")
def pg():
    with cluster() as c:
        yield c


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sglang_mx.provider", "provider", *args],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def schema(url: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema='public' ORDER BY 1, 2"
        ).fetchall()


def test_migrate_is_idempotent(pg) -> None:
    url = new_database(pg)
    first = cli("db", "migrate", "--db", url)
    assert first.returncode == 0, first.stderr
    n = len(available("postgresql"))
    assert f"schema at version {n} ({n} applied now)" in first.stdout
    before = schema(url)
    again = cli("db", "migrate", "--db", url)
    assert again.returncode == 0 and f"schema at version {n} (0 applied now)" in again.stdout
    assert schema(url) == before and applied(open_database(url)) == list(range(1, n + 1))


def test_sqlite_file_from_before_migrations_opens(tmp_path) -> None:
    """A file made by the previous release (its schema, a key, a settled and a pending row)
    migrates in place: the key authenticates, the balance is its settled rows' cost."""
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(available("sqlite")[0].sql)  # the schema as the previous release made it
    old.close()
    keys = KeyStore(path)
    key, plain = keys.create("old")
    ledger = Ledger(path)
    ledger.start("r1", key.id, "m")
    ledger.finish("r1", "ok", 10, 5, 0, 0.25)
    assert keys.lookup(plain).id == key.id and ledger.balance(key.id) == (0.25, 0.0)
    assert applied(ledger.db) == list(range(1, len(available("sqlite")) + 1))


def _sqlite_store(path, rows: int):
    keys = KeyStore(path)
    a, plain_a = keys.create("a", rpm=5, limit_usd=1.5)
    b, _ = keys.create("b")
    ledger = Ledger(path)
    for i in range(rows):
        kid = a.id if i % 3 else b.id
        ledger.start(f"r{i}", kid, "m")
        if i != rows - 1:  # the last one left pending, as a crash would
            stats = _stats(f"r{i}", i) if i % 2 else None  # a native request has none
            ledger.finish(f"r{i}", "ok", 7 + i, 3 * i, i % 4, (7 + i) * 1e-7 + i * 3.3e-7,
                          stats=stats)  # fmt: skip
    return (a, plain_a), b


def _stats(row: str, i: int) -> GenerationStats:
    return GenerationStats(row, "completions", bool(i % 4), "stop", "eos", i, 1.25 * i)


def test_import_moves_keys_and_ledger_with_sums_checked(pg, tmp_path) -> None:
    src = tmp_path / "src.sqlite"
    (a, plain_a), b = _sqlite_store(src, 50)
    url = new_database(pg)
    out = cli("db", "import", "--db", url, "--from", str(src))
    assert out.returncode == 0, out.stderr
    assert "imported 2 keys and 50 ledger rows" in out.stdout and "checked" in out.stdout
    lite = sqlite3.connect(src)
    import psycopg

    with psycopg.connect(url) as conn:
        for key_id in (a.id, b.id):
            q = ("SELECT COUNT(*), SUM(prompt_tokens + completion_tokens), "
                 "SUM(cost) FROM ledger WHERE key_id={}")  # fmt: skip
            n, toks, usd = lite.execute(q.format("?"), (key_id,)).fetchone()
            n2, toks2, usd2 = conn.execute(q.format("%s"), (key_id,)).fetchone()
            assert (n, toks) == (n2, toks2)
            exact = sum(Decimal(repr(c)) for (c,) in lite.execute(
                "SELECT cost FROM ledger WHERE key_id=?", (key_id,)))  # fmt: skip
            assert usd2 == exact and float(usd2) == pytest.approx(usd, rel=1e-12)
    assert KeyStore(url).lookup(plain_a).id == a.id  # the salt came along
    log = GenerationLog(open_database(url))
    assert [log.get(f"r{i}") for i in range(50)] == [
        _stats(f"r{i}", i) if i % 2 and i != 49 else None for i in range(50)
    ]  # every stats row came along, and no other
    pending = Ledger(url).get("r49")
    assert pending.status == "pending" and pending.replica is None
    again = cli("db", "import", "--db", url, "--from", str(src))
    assert again.returncode == 1 and "import only into an empty store" in again.stderr
    missing = cli("db", "import", "--db", url, "--from", str(tmp_path / "nope.sqlite"))
    assert missing.returncode == 1 and "no such SQLite file" in missing.stderr


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_stats_settle_with_their_row(pg, tmp_path, store) -> None:
    """A served request's generation stats are written by the call that settles its row, and
    only the first stand: a second settlement changes neither the row nor the stats."""
    url = new_database(pg) if store == "postgresql" else tmp_path / "s.sqlite"
    ledger = Ledger(url)
    log = GenerationLog(ledger.db)
    assert ledger.open(["g1"], "k", "m", 0.5, 10.0, replica=None) is None
    assert log.get("g1") is None
    assert ledger.finish("g1", "ok", 4, 7, 0, 0.125, stats=_stats("g1", 3)) is True
    assert log.get("g1") == _stats("g1", 3) and ledger.balance("k") == (0.125, 0.0)
    assert ledger.finish("g1", "error", 0, 0, 0, 0.0, stats=_stats("g1", 5)) is False
    assert log.get("g1") == _stats("g1", 3) and ledger.get("g1").status == "ok"


def test_a_busy_keys_window_stays_small_and_exact(pg) -> None:
    """The shared rate window is one row per key per second: 300 admissions and settlements in
    a second or two leave at most 3 rows, holding every request and token; the 21st of an RPM
    of 20 waits, 1 to 60 s."""
    url = new_database(pg)
    ledger = Ledger(url)
    for i in range(300):
        wait, refused = ledger.admit_open((10**6, 10**9, 1), [f"b{i}"], "busy", "m", 0.0, None, "r")
        assert (wait, refused) == (0.0, None)
        assert ledger.finish(f"b{i}", "ok", 3, 2, 0, 1e-6) is True
    rows = ledger.db.execute(
        "SELECT COUNT(*), SUM(requests), SUM(tokens) FROM rate_events WHERE key_id='busy'"
    )[0]
    assert rows[0] <= 3 and (rows[1], rows[2]) == (300, 1500), rows
    waits = [ledger.admit_open((20, 10**9, 1), [f"c{i}"], "slow", "m", 0.0, None, "r")[0]
             for i in range(21)]  # fmt: skip
    assert waits[:20] == [0.0] * 20 and 1 <= waits[20] <= 60, waits


def test_a_row_settles_once_whoever_settles(pg) -> None:
    """Eight connections settle one pending row at once (a replica finishing it, sweepers
    settling it): exactly one succeeds; the balance holds that one cost and no reservation."""
    import threading

    url = new_database(pg)
    ledger = Ledger(url)
    assert ledger.open(["row"], "k", "m", 0.5, 10.0, replica=None) is None
    assert ledger.balance("k") == (0.0, 0.5)
    start, results = threading.Barrier(8), []

    def settle(i: int) -> None:
        mine = Ledger(url)  # its own connection
        start.wait()
        results.append(mine.finish("row", "ok", 1, 1, 0, 0.25 + i))
        mine.db.close()

    threads = [threading.Thread(target=settle, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [False] * 7 + [True]
    spent, held = ledger.balance("k")
    assert held == 0.0 and spent == ledger.get("row").cost == ledger.spend("k")
    assert ledger.settle_orphans(lambda *a: 99.0, 0.0) == 0  # nothing pending is left


def test_one_keys_admissions_and_settlements_never_deadlock(pg) -> None:
    """Two connections (two replicas) admit and settle requests of one capped key as fast as
    they can, so one's settlement meets the other's admission: 300 each, none fails, and the
    balance and token window hold every request once. Every request-path function takes the
    key's rate bucket before its balance row; with settlement in the other order PostgreSQL
    found a deadlock within a few hundred (seen as 503 store_unavailable through two replicas)."""
    import threading

    url = new_database(pg)
    Ledger(url).db.close()  # migrated
    start, errors = threading.Barrier(2), []

    def replica(tag: str) -> None:
        ledger = Ledger(url)  # its own connection
        start.wait()
        for i in range(300):
            try:
                admitted = ledger.admit_open(
                    (10**6, 10**9, 1), [f"{tag}{i}"], "hot", "m", 1e-6, 1e6, tag
                )
                assert admitted == (0.0, None), admitted
                assert ledger.finish(f"{tag}{i}", "ok", 3, 2, 0, 1e-6) is True
            except Exception as e:  # noqa: BLE001 - collected, asserted below
                errors.append(repr(e)[:300])
        ledger.db.close()

    threads = [threading.Thread(target=replica, args=(tag,)) for tag in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [], errors[:3]
    ledger = Ledger(url)
    rows = ledger.db.execute(
        "SELECT SUM(requests), SUM(tokens) FROM rate_events WHERE key_id='hot'"
    )[0]
    assert tuple(rows) == (600, 3000) and ledger.balance("hot") == (pytest.approx(6e-4), 0.0)
