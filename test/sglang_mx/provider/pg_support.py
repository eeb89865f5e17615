"""The shared-store tests' parts: a throwaway PostgreSQL cluster (sglang_mx.provider.pg_local:
initdb and the server run as the `postgres` user when the suite runs as root, in a directory
that user owns, socket only), a fresh database per module, provider replicas on it in front of
the scripted upstream, and reads of the ledger straight from the database.

SGLANG_MX_TEST_STORE=sqlite runs the same tests with every replica on one SQLite file instead,
and SGLANG_MX_TEST_PROVIDER_PATH=DIR starts the replicas from another source tree (DIR is put
first on their PYTHONPATH): together they show what the tests find on the per-process limiter
of an earlier release."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import psycopg
from provider_support import provider_process
from sglang_mx.provider import pg_local

STORE = os.environ.get("SGLANG_MX_TEST_STORE", "postgresql")
OTHER_TREE = os.environ.get("SGLANG_MX_TEST_PROVIDER_PATH")


@contextlib.contextmanager
def cluster() -> Iterator[pg_local.LocalCluster]:
    c = pg_local.create()
    try:
        yield c
    finally:
        with contextlib.suppress(Exception):
            c.stop("immediate")
        shutil.rmtree(c.root, ignore_errors=True)


def new_database(c: pg_local.LocalCluster) -> str:
    """A fresh, empty database on the cluster; its URL (the provider migrates it)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(
        c.url.replace(f"/{pg_local.DBNAME}?", "/postgres?"), autocommit=True
    ) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return c.url.replace(f"/{pg_local.DBNAME}?", f"/{name}?")


@dataclass
class Store:
    """Where the replicas under test keep keys and the ledger, and exact reads of it."""

    target: str  # --db: a PostgreSQL URL, or an SQLite file path (SGLANG_MX_TEST_STORE=sqlite)
    cluster: pg_local.LocalCluster | None = None  # the PostgreSQL server holding it

    @property
    def shared(self) -> bool:
        return self.target.startswith("postgresql://")

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Rows as the database holds them (NUMERIC as Decimal, exact)."""
        if self.shared:
            with psycopg.connect(self.target, autocommit=True) as conn:
                return conn.execute(sql.replace("?", "%s"), params).fetchall()
        with contextlib.closing(sqlite3.connect(self.target)) as conn:
            return conn.execute(sql, params).fetchall()

    def rows(self, key_id: str) -> list[tuple]:
        """(id, status, prompt, completion, cost, error) of each of the key's ledger rows."""
        return self.query(
            "SELECT id, status, prompt_tokens, completion_tokens, cost, error FROM ledger "
            "WHERE key_id=? ORDER BY created",
            (key_id,),
        )

    def spent_exact(self, key_id: str) -> tuple[Decimal, Decimal | None]:
        """(sum of the key's ledger costs, the balance the admission path charges against)."""
        total = self.query("SELECT COALESCE(SUM(cost), 0) FROM ledger WHERE key_id=?", (key_id,))
        try:
            bal = self.query("SELECT spent FROM key_balance WHERE key_id=?", (key_id,))
        except sqlite3.OperationalError:  # an earlier release's file: no balances
            bal = [(None,)]
        if not bal:
            return Decimal(str(total[0][0])), Decimal(0)
        return Decimal(str(total[0][0])), None if bal[0][0] is None else Decimal(str(bal[0][0]))

    def create_key(self, name: str, *flags: str) -> tuple[str, str]:
        """(key id, plaintext key), made by this tree's KeyStore, or by `sglang-mx provider keys
        create` of SGLANG_MX_TEST_PROVIDER_PATH's tree when that is set."""
        if not OTHER_TREE:
            from sglang_mx.provider.keys import KeyStore

            limits = dict(zip(flags[::2], flags[1::2], strict=True))
            ks = KeyStore(self.target)
            key, plain = ks.create(
                name,
                rpm=int(limits["--rpm"]) if "--rpm" in limits else None,
                tpm=int(limits["--tpm"]) if "--tpm" in limits else None,
                limit_usd=float(limits["--limit-usd"]) if "--limit-usd" in limits else None,
            )
            ks.db.close()
            return key.id, plain
        out = subprocess.run(
            [sys.executable, "-m", "sglang_mx.provider", "provider", "keys", "create",
             "--db", self.target, "--name", name, *flags],
            capture_output=True, text=True, check=True, timeout=60, env=_replica_env(),
        ).stdout.split()  # fmt: skip
        return out[1], out[-1]


def _replica_env() -> dict[str, str]:
    env = dict(os.environ)
    if OTHER_TREE:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (OTHER_TREE, env.get("PYTHONPATH")) if p)
    return env


@contextlib.contextmanager
def store(tmp: Path) -> Iterator[Store]:
    """A fresh store for a module's replicas: a database on a throwaway cluster, or one SQLite
    file (SGLANG_MX_TEST_STORE=sqlite)."""
    if STORE == "sqlite":
        yield Store(str(tmp / "shared.sqlite"))
        return
    with cluster() as c:
        yield Store(new_database(c), c)


LEASE_S = 2.0  # the replicas' lease in these tests (the default is 10 s)
SWEEP_BOUND_S = LEASE_S + LEASE_S / 5 + 3.0  # lease, one renewal period, slack for a busy box


@contextlib.contextmanager
def replica(upstream: str, pricing: Path, s: Store, *extra: str, port: int | None = None):
    """One provider process on the store (from SGLANG_MX_TEST_PROVIDER_PATH's tree if set),
    with a LEASE_S lease and a ledger write per streamed token."""
    extra = ("--ledger-flush-tokens", "1", "--keepalive-s", "0.5", *extra)
    if not OTHER_TREE:  # an earlier release has no leases
        extra = ("--replica-lease-s", str(LEASE_S), *extra)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = _replica_env().get("PYTHONPATH", "")
    try:
        cm = provider_process(upstream, pricing, s.target, *extra, port=port)  # type: ignore[arg-type]
        prov = cm.__enter__()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        yield prov
    finally:
        cm.__exit__(None, None, None)


def wait_settled(s: Store, key_id: str, bound_s: float) -> float:
    """Seconds until the key has no pending row; fails past bound_s."""
    t0 = time.monotonic()
    while any(r[1] == "pending" for r in s.rows(key_id)):
        assert time.monotonic() - t0 < bound_s, f"rows still pending after {bound_s} s"
        time.sleep(0.1)
    return time.monotonic() - t0


def assert_billed_once(s: Store, key_id: str) -> None:
    """The key's balance and its token window each took every row exactly once."""
    total, balance = s.spent_exact(key_id)
    assert balance == total, f"balance {balance} != ledger sum {total}"
    if s.shared:
        tokens = s.query(
            "SELECT COALESCE(SUM(tokens), 0) FROM rate_events WHERE key_id=?", (key_id,)
        )[0][0]
        billed = sum(r[2] + r[3] for r in s.rows(key_id))
        assert tokens == billed, f"token window {tokens} != ledger tokens {billed}"
