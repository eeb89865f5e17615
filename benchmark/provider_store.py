"""What the shared store costs on the request path.

1. Driver: one request's two store calls (admission and opening its row with the spend
   reservation, `mx_admit_open`; settling it with its generation stats, `mx_settle`) against a
   local PostgreSQL, through the provider's own Ledger (libpq's prepared statements through
   psycopg's `pgconn`, what the provider does), psycopg 3's `execute` called synchronously,
   psycopg 3's async connection and asyncpg (both on uvloop), p50/p99 per request; the
   embedded SQLite store's same steps beside them.
2. Added latency: 1-token /v1/completions, interleaved: direct to the upstream, through one
   provider on SQLite, one on PostgreSQL, and HAProxy in front of two PostgreSQL replicas (the
   load balancer's hop included). "Added" is the median of per-pair differences against direct.
   Each round sends the four in a shuffled order (seeded): a path's work after its reply (the
   PostgreSQL settlement, in the provider and in the server) runs during whichever request comes
   next, and on two cores a fixed order would always charge it to the same neighbour.

   Then direct and the PostgreSQL provider alone, the same way, with nothing else started.
3. Idle: one `SELECT 1` round trip after the connection sat idle 0, 3 and 10 ms. Interleaved
   paths leave each process idle between its requests, and on this box a process woken from
   idle answers late: the figure says how much of the added latency is waking up, not work.

Each part runs on a cluster of its own, made for it, so that the vacuum and checkpoint work one
part leaves behind does not run during the next.
   The upstream is benchmark/null_upstream.py (a fixed completion, no model: the provider's own
   work, nothing contending for the cores; not SGLang).

    python benchmark/provider_store.py [--requests N] [--calls N]

Starts a throwaway PostgreSQL cluster (sglang_mx.provider.pg_local) and stops it; writes JSON +
PNG under docs/results/."""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from common import finish, parser, pct, run_meta
from provider_overhead import cpu_seconds, null_upstream, timed_post, write_pricing
from sglang_mx.provider import pg_local
from sglang_mx.provider.haproxy import haproxy_process
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.launch import free_port, provider_process

OPEN = (
    "SELECT * FROM mx_admit_open(1000000000, 1000000000, 1, ARRAY[%s], %s, 'm', 'bench', "
    "0.0001, 1000000)"
)
SETTLE = (
    "SELECT mx_settle(%s, 'ok', 5, 1, 4, 0.0000045, NULL, 'completions', 0, 'stop', 'stop', 0, 1.5)"
)


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50_us": 1e6 * pct(xs, 50), "p99_us": 1e6 * pct(xs, 99)}


def psycopg_sync(url: str, n: int) -> list[float]:
    import psycopg

    out = []
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SET synchronous_commit = off")
        for i in range(n + 20):
            rid = uuid.uuid4().hex
            t0 = time.perf_counter()
            c.execute(OPEN, (rid, "k")).fetchall()
            c.execute(SETTLE, (rid,)).fetchall()
            if i >= 20:
                out.append(time.perf_counter() - t0)
    return out


async def _psycopg_async(url: str, n: int) -> list[float]:
    import psycopg

    out = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as c:
        await c.execute("SET synchronous_commit = off")
        for i in range(n + 20):
            rid = uuid.uuid4().hex
            t0 = time.perf_counter()
            await (await c.execute(OPEN, (rid, "k"))).fetchall()
            await (await c.execute(SETTLE, (rid,))).fetchall()
            if i >= 20:
                out.append(time.perf_counter() - t0)
    return out


async def _asyncpg(url: str, n: int) -> list[float]:
    import asyncpg

    out = []
    c = await asyncpg.connect(url.replace("postgresql://", "postgres://"))
    try:
        await c.execute("SET synchronous_commit = off")
        opened, settle = (q.replace("%s", "$1", 1).replace("%s", "$2")
                          for q in (OPEN, SETTLE))  # fmt: skip
        for i in range(n + 20):
            rid = uuid.uuid4().hex
            t0 = time.perf_counter()
            await c.fetch(opened, rid, "k")
            await c.fetch(settle, rid)
            if i >= 20:
                out.append(time.perf_counter() - t0)
    finally:
        await c.close()
    return out


def _ledger_requests(ledger, n: int, admit) -> list[float]:
    """Seconds per request of `admit(rid)` then Ledger.finish with the generation stats (the
    store's work for one served request); 20 warm-up requests first."""
    from sglang_mx.provider.generations import GenerationStats

    out = []
    for i in range(n + 20):
        rid = uuid.uuid4().hex
        t0 = time.perf_counter()
        admit(rid)
        stats = GenerationStats(rid, "completions", False, "stop", "stop", 0, 1.5)
        ledger.finish(rid, "ok", 5, 1, 4, 4.5e-6, stats=stats)
        if i >= 20:
            out.append(time.perf_counter() - t0)
    ledger.db.close()
    return out


def provider_ledger(url: str, n: int) -> list[float]:
    """What the provider runs: Ledger.admit_open and Ledger.finish (pg.PgDatabase.call:
    libpq's prepared statements, text in and out)."""
    from sglang_mx.provider.ledger import Ledger

    ledger = Ledger(url)
    return _ledger_requests(
        ledger, n, lambda rid: ledger.admit_open((10**9, 10**9, 1), [rid], "k", "m", 0.0001,
                                                 1e6, "bench"),
    )  # fmt: skip


def _on_uvloop(coro_fn, url: str, n: int) -> list[float]:
    import uvloop

    return uvloop.run(coro_fn(url, n))


def sqlite_store(tmp: Path, n: int) -> list[float]:
    """The embedded store's same steps: in-memory limiter, Ledger.open and Ledger.finish."""
    from sglang_mx.provider.ledger import Ledger
    from sglang_mx.provider.ratelimit import RateLimiter

    ledger, limiter = Ledger(tmp / "drivers.sqlite", background_checkpoint=True), RateLimiter()

    def admit(rid: str) -> None:
        limiter.acquire("k", 10**9, 10**9)
        ledger.open([rid], "k", "m", 0.0001, 1e6)

    return _ledger_requests(ledger, n, admit)


def idle_round_trip(cluster: pg_local.LocalCluster, n: int = 500) -> dict[str, Any]:
    import psycopg

    out: dict[str, Any] = {"requests": n}
    with psycopg.connect(cluster.url, autocommit=True) as c:
        pg = c.pgconn
        pg.prepare(b"one", b"SELECT 1")
        for idle_ms in (0, 3, 10):
            xs = []
            for _ in range(n):
                time.sleep(idle_ms / 1e3)
                t0 = time.perf_counter()
                pg.exec_prepared(b"one", [])
                xs.append(time.perf_counter() - t0)
            out[f"idle_{idle_ms}_ms"] = summary(xs)
    return out


def drivers(cluster: pg_local.LocalCluster, tmp: Path, n: int) -> dict[str, Any]:
    from sglang_mx.provider.db import open_database

    open_database(cluster.url).close()  # migrate
    runs = {
        "provider_ledger_libpq": lambda: provider_ledger(cluster.url, n),
        "psycopg3_sync": lambda: psycopg_sync(cluster.url, n),
        "psycopg3_async_uvloop": lambda: _on_uvloop(_psycopg_async, cluster.url, n),
        "asyncpg_uvloop": lambda: _on_uvloop(_asyncpg, cluster.url, n),
        "sqlite_embedded": lambda: sqlite_store(tmp, n),
    }
    out: dict[str, Any] = {"calls_per_request": 2, "requests": n}
    for _ in range(2):  # two rounds, interleaved by driver; the better round is kept
        for name, fn in runs.items():
            row = summary(fn())
            if name not in out or row["p50_us"] < out[name]["p50_us"]:
                out[name] = row
    return out


def added_latency(
    cluster: pg_local.LocalCluster, tmp: Path, n: int, alone: bool = False
) -> dict[str, Any]:
    """Every path interleaved (alone: direct and one provider on PostgreSQL, nothing else
    started, so neither process sits idle while three others serve)."""
    with ExitStack() as stack:
        up, model = null_upstream(stack)
        pricing = write_pricing(tmp / "pricing.json", model)
        lite = tmp / "bench.sqlite"
        keys = {}
        for name, db in (("sqlite", lite), ("postgresql", cluster.url)):
            keys[name] = KeyStore(db).create("bench", 10**9, 10**9, 1e6)[1]  # capped: reserves
        flags = ("--default-rpm", "100000000")
        p_pg = stack.enter_context(provider_process(up, pricing, cluster.url, *flags))
        paths = {"provider_postgresql": (p_pg.url, keys["postgresql"], [p_pg])}
        if not alone:
            p_lite = stack.enter_context(provider_process(up, pricing, lite, *flags))
            # the balanced pair is its own two replicas, so each path's CPU is its own
            p_pg2 = stack.enter_context(provider_process(up, pricing, cluster.url, *flags))
            p_pg3 = stack.enter_context(provider_process(up, pricing, cluster.url, *flags))
            lb = stack.enter_context(haproxy_process(free_port(), [p_pg2.url, p_pg3.url]))
            paths = {
                "provider_sqlite": (p_lite.url, keys["sqlite"], [p_lite]),
                **paths,
                "haproxy_2x_provider_postgresql": (lb, keys["postgresql"], [p_pg2, p_pg3]),
            }
        return _interleaved(up, model, paths, n)


def _interleaved(up: str, model: str, paths: dict[str, tuple], n: int) -> dict[str, Any]:
    direct_body = {"model": model, "prompt": "The quick brown fox", "max_tokens": 1}
    prov_body = dict(direct_body, model="bench/tiny")
    times: dict[str, list[float]] = {"direct": [], **{k: [] for k in paths}}
    order = ["direct", *paths]
    shuffle = random.Random(57).shuffle
    procs = [p for _, _, ps in paths.values() for p in ps]

    def send(name: str) -> float:
        if name == "direct":
            return timed_post(c, up + "/v1/completions", direct_body, {})
        url, key, _ = paths[name]
        h = {"Authorization": f"Bearer {key}"}
        return timed_post(c, url + "/v1/completions", prov_body, h)

    with httpx.Client(timeout=60) as c:
        for _ in range(20):  # warm every path
            for name in order:
                send(name)
        cpu0 = {p.proc.pid: cpu_seconds(p.proc.pid) for p in procs}
        for _ in range(n):
            shuffle(order)
            for name in order:
                times[name].append(send(name))
        cpu = {pid: cpu_seconds(pid) - t for pid, t in cpu0.items()}
    out: dict[str, Any] = {"requests": n, "upstream": "benchmark/null_upstream.py (not SGLang)",
                           "order": "shuffled per round (seed 57)",
                           "direct_p50_ms": 1e3 * pct(times["direct"], 50),
                           "direct_p99_ms": 1e3 * pct(times["direct"], 99)}  # fmt: skip
    for name, (_, _, ps) in paths.items():
        diffs = [b - a for a, b in zip(times["direct"], times[name], strict=True)]
        out[name] = {
            "p50_ms": 1e3 * pct(times[name], 50),
            "p99_ms": 1e3 * pct(times[name], 99),
            "added_p50_ms": 1e3 * statistics.median(diffs),
            "added_p99_ms": 1e3 * (pct(times[name], 99) - pct(times["direct"], 99)),
            "provider_cpu_us_per_request": 1e6 * sum(cpu[p.proc.pid] for p in ps) / n,
        }
    out["load_avg_1m_after"] = os.getloadavg()[0]
    return out


def store_versions() -> dict[str, str]:
    from importlib.metadata import version

    def first_line(cmd: list[str]) -> str:
        out = subprocess.run(cmd, capture_output=True, text=True)
        return (out.stdout or out.stderr).splitlines()[0]

    return {
        "postgresql": first_line([str(pg_local.bin_dir() / "postgres"), "--version"]),
        "postgresql_setup": "local cluster, Unix socket, synchronous_commit=off (the default)",
        "haproxy": first_line(["haproxy", "-v"]),
        "psycopg": version("psycopg"),
        "asyncpg": version("asyncpg"),
        "uvloop": version("uvloop"),
    }


def table(result: dict[str, Any]) -> None:
    d = result["drivers"]
    print(f"store calls per request ({d['calls_per_request']} calls, {d['requests']} requests):")
    for name in ("provider_ledger_libpq", "psycopg3_sync", "psycopg3_async_uvloop",
                 "asyncpg_uvloop", "sqlite_embedded"):  # fmt: skip
        print(f"  {name:24} p50 {d[name]['p50_us']:7.0f} us  p99 {d[name]['p99_us']:7.0f} us")
    a = result["added"]
    print(f"added latency vs direct ({a['requests']} interleaved requests, {a['upstream']}); "
          f"direct p50 {a['direct_p50_ms']:.2f} ms:")  # fmt: skip
    for name in ("provider_sqlite", "provider_postgresql", "haproxy_2x_provider_postgresql"):
        r = a[name]
        print(f"  {name:32} added p50 {r['added_p50_ms']:.2f} ms  p99 {r['added_p99_ms']:.2f} ms"
              f"  CPU {r['provider_cpu_us_per_request']:.0f} us/req")  # fmt: skip
    r = result["added_postgresql_alone"]["provider_postgresql"]
    print(
        f"  {'provider_postgresql alone':32} added p50 {r['added_p50_ms']:.2f} ms  p99 "
        f"{r['added_p99_ms']:.2f} ms  CPU {r['provider_cpu_us_per_request']:.0f} us/req"
    )
    idle = result["idle"]
    print("SELECT 1 after the connection sat idle: " + ", ".join(
        f"{k[5:].replace('_', ' ')} p50 {v['p50_us']:.0f} us"
        for k, v in idle.items() if k.startswith("idle_")))  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    d = result["drivers"]
    names = ["provider_ledger_libpq", "psycopg3_sync", "psycopg3_async_uvloop", "asyncpg_uvloop",
             "sqlite_embedded"]  # fmt: skip
    ax1.bar(names, [d[n]["p50_us"] for n in names], label="p50")
    ax1.set_ylabel("us per request (2 store calls)")
    ax1.set_title("store calls per request, p50")
    ax1.tick_params(axis="x", labelrotation=20, labelsize=7)
    a = result["added"]
    paths = ["provider_sqlite", "provider_postgresql", "haproxy_2x_provider_postgresql"]
    alone = result["added_postgresql_alone"]["provider_postgresql"]["added_p50_ms"]
    ax2.bar([*paths, "provider_postgresql_alone"], [a[p]["added_p50_ms"] for p in paths] + [alone])
    ax2.axhline(2.0, color="red", linestyle="--", label="2 ms target")
    ax2.set_ylabel("added p50 ms vs direct")
    ax2.set_title("added latency (null upstream)")
    ax2.tick_params(axis="x", labelrotation=20, labelsize=7)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    out = Path(__file__).resolve().parents[1] / "docs/results/provider-store.json"
    p = parser(__doc__, str(out), requests=1000, calls=2000)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="provider-store-"))
    result = {
        "meta": run_meta("null upstream (no model)", args),
        "store": store_versions(),
        "drivers": on_fresh_cluster(lambda c: drivers(c, tmp, args.calls)),
        "added": on_fresh_cluster(lambda c: added_latency(c, tmp, args.requests)),
        "added_postgresql_alone": on_fresh_cluster(
            lambda c: added_latency(c, tmp, args.requests, alone=True)
        ),
        "idle": on_fresh_cluster(idle_round_trip),
    }
    return finish(result, Path(args.out), table, plot)


def on_fresh_cluster(part: Callable[[pg_local.LocalCluster], dict[str, Any]]) -> dict[str, Any]:
    """Run one part of the benchmark on a throwaway cluster of its own, stopped after it."""
    with ExitStack() as stack:
        cluster = pg_local.create()
        stack.callback(lambda: shutil.rmtree(cluster.root, ignore_errors=True))
        stack.callback(lambda: cluster.stop("fast"))
        return part(cluster)


if __name__ == "__main__":
    sys.exit(main())
