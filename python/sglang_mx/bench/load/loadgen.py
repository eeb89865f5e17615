"""The send phase of a run, in one process or spread over worker processes with one clock.

`drive` sends a trace's requests from one event loop: open-loop arrivals at their times, a closed
loop through a concurrency gate, a session's turn only after its previous turn ended. `spread`
splits the requests over `processes` worker processes (spawned, each with its own event loop and
HTTP client): a session's turns stay in one worker, sessions are dealt round-robin in order of
first arrival, and a closed loop's concurrency is shared out. Every worker times against the
same t0 on the system-wide monotonic clock (time.perf_counter is CLOCK_MONOTONIC on Linux), set
by the parent once all workers are ready, so the merged results read as one run: send times,
first tokens and schedule lag on one axis (reach.by_send_time orders them after the run).

Each worker measures its own event-loop lag and CPU seconds; the self-check judges the busiest
process, as one process near its limit delays its share of the load however idle the rest are."""

from __future__ import annotations

import asyncio
import math
import sys
import time
from dataclasses import dataclass

from sglang_mx.bench.load.client_check import CpuClock, LoopProbe
from sglang_mx.bench.load.limits import BenchError
from sglang_mx.bench.load.stream import send_one
from sglang_mx.measure.metrics import RequestResult

READY_TIMEOUT_S = 120.0  # a spawned worker imports httpx and the bench package first
START_MARGIN_S = 0.2  # t0 is this far after the last worker reported ready


@dataclass
class Job:
    """One request as a worker sends it (prompt already materialized)."""

    id: str
    ids: list[int]
    text: str
    output_len: int
    arrival_s: float | None = None
    after: str | None = None


@dataclass
class Driven:
    """What one process measured: its results, its event-loop lateness, CPU and wall seconds."""

    results: list[RequestResult]
    loop_late: list[float]
    cpu_s: float
    wall_s: float


def http_client(cfg):
    import httpx

    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    timeout = httpx.Timeout(cfg.timeout_s, connect=30.0)
    return httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers)


class Progress:
    """The bar a one-process run draws on stderr as its requests finish (off: counts only)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.errors, self.enabled = total, 0, 0, enabled
        self.t0 = time.perf_counter()

    def tick(self, ok: bool) -> None:
        self.done += 1
        self.errors += 0 if ok else 1
        if self.enabled:
            width = 30
            fill = int(width * self.done / self.total)
            sys.stderr.write(
                f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} "
                f"errors {self.errors} {time.perf_counter() - self.t0:6.1f}s"
            )
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


async def drive(
    client,
    cfg,
    model: str,
    jobs: list[Job],
    t0: float,
    concurrency: int | None,
    progress: Progress | None = None,
    worker: int = 0,
) -> Driven:
    """Send `jobs` from this event loop against t0 (perf_counter); results in `jobs` order, each
    marked with `worker`."""
    done = {j.id: asyncio.Event() for j in jobs}
    gate = asyncio.Semaphore(concurrency) if concurrency else None
    probe, clock = LoopProbe(), CpuClock()
    probe.start()
    clock.start()

    async def one(j: Job) -> RequestResult:
        due = t0 + (j.arrival_s or 0.0)
        # A closed loop's first sends too: a spawned worker learns t0 before it comes
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        if j.after:
            await done[j.after].wait()
            due = max(due, time.perf_counter())  # free to go once its previous turn ended
        try:
            if gate is None:
                res = await send_one(client, cfg, model, j.ids, j.text, j.id, j.output_len, t0,
                                     due)  # fmt: skip
            else:
                async with gate:
                    due = max(due, time.perf_counter())  # a closed loop: when a slot freed
                    res = await send_one(client, cfg, model, j.ids, j.text, j.id, j.output_len,
                                         t0, due)  # fmt: skip
        finally:
            done[j.id].set()
        res.worker = worker
        if progress is not None:
            progress.tick(res.ok)
        return res

    results = list(await asyncio.gather(*(one(j) for j in jobs)))
    cpu_s, wall_s = clock.read()
    await probe.stop()
    return Driven(results, probe.late, cpu_s, wall_s)


def split(jobs: list[Job], processes: int) -> list[list[Job]]:
    """Sessions (chains of `after`) dealt round-robin over `processes` in order of first arrival;
    empty shares are dropped."""
    root: dict[str, str] = {}
    sessions: dict[str, list[Job]] = {}
    for j in jobs:
        root[j.id] = root.get(j.after, j.id) if j.after else j.id
        sessions.setdefault(root[j.id], []).append(j)
    order = sorted(sessions.values(), key=lambda s: min(j.arrival_s or 0.0 for j in s))
    shares: list[list[Job]] = [[] for _ in range(processes)]
    for i, session in enumerate(order):
        shares[i % processes].extend(session)
    return [s for s in shares if s]


def share_concurrency(concurrency: int | None, shares: int) -> list[int | None]:
    """A closed loop's slots over `shares` workers (the first ones get the remainder)."""
    if not concurrency:
        return [None] * shares
    base, extra = divmod(concurrency, shares)
    return [base + (1 if i < extra else 0) for i in range(shares)]


def _worker(conn, cfg, model: str, jobs: list[Job], concurrency: int | None, index: int) -> None:
    """A worker process: report ready, wait for t0, drive its share, send back what it measured
    (or the error that stopped it)."""
    try:
        asyncio.run(_worker_run(conn, cfg, model, jobs, concurrency, index))
    except BaseException as exc:  # the parent turns this into one line
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


async def _worker_run(conn, cfg, model, jobs, concurrency, index) -> None:
    async with http_client(cfg) as client:
        conn.send(("ready", None))
        t0 = conn.recv()  # blocks this loop before any request: nothing is in flight yet
        driven = await drive(client, cfg, model, jobs, t0, concurrency, worker=index)
    conn.send(("done", driven))


def spread(
    cfg, model: str, jobs: list[Job], concurrency: int | None, processes: int
) -> tuple[float, list[Driven]]:
    """Drive `jobs` from `processes` spawned workers; returns the shared t0 and each worker's
    record. A worker that fails or dies stops the run with a BenchError naming it."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no fork of a process that may hold threads and sockets
    shares = split(jobs, processes)
    slots = share_concurrency(concurrency, len(shares))
    workers = []
    try:
        for i, (share, slot) in enumerate(zip(shares, slots, strict=True)):
            parent, child = ctx.Pipe()
            args = (child, cfg, model, share, slot, i)
            proc = ctx.Process(target=_worker, args=args, daemon=True)
            proc.start()
            child.close()
            workers.append((proc, parent))
        for i, (proc, conn) in enumerate(workers):
            _expect(proc, conn, "ready", i, READY_TIMEOUT_S)
        t0 = time.perf_counter() + START_MARGIN_S
        for _, conn in workers:
            conn.send(t0)
        # no deadline of its own: each request has cfg.timeout_s, as in one process
        out = [_expect(proc, conn, "done", i, math.inf) for i, (proc, conn) in enumerate(workers)]
        return t0, out
    finally:
        for proc, conn in workers:
            conn.close()
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _expect(proc, conn, kind: str, index: int, timeout_s: float):
    """The worker's next message, which must be `kind`; a worker that dies or stays silent past
    `timeout_s` is an error."""
    start = time.monotonic()
    while not conn.poll(1.0):
        if not proc.is_alive() and not conn.poll(0):
            raise BenchError(f"load worker {index} exited (code {proc.exitcode}) before {kind}")
        if time.monotonic() - start > timeout_s:
            raise BenchError(f"load worker {index} sent nothing in {timeout_s:.0f} s ({kind})")
    try:
        got, payload = conn.recv()
    except EOFError:
        raise BenchError(f"load worker {index} exited before it was {kind}") from None
    if got == "error":
        raise BenchError(f"load worker {index} failed: {payload}")
    return payload
