"""A load worker that starts early, the plant test_bench_loadgen.py runs against the self-check
(issue 54, item 4): the real `loadgen._worker` in its spawned process, but the wait for each
request's due time ends EARLY_S too soon, as a worker whose schedule was off would send. Its
records still time each send against the shared t0, so the self-check must see it."""

from __future__ import annotations

import asyncio

EARLY_S = 0.2
EARLY_WORKER = 1  # the second of the run's workers; the first keeps its schedule


class _EarlyAsyncio:
    """asyncio as loadgen.py sees it, but `sleep` ends EARLY_S sooner (loadgen sleeps only to
    wait for a request's due time; the event-loop probe has asyncio of its own)."""

    def __getattr__(self, name: str):
        return getattr(asyncio, name)

    @staticmethod
    async def sleep(delay: float, result=None):
        return await asyncio.sleep(max(0.0, delay - EARLY_S), result)


def early_worker(conn, cfg, model: str, jobs, concurrency, index: int) -> None:
    """loadgen._worker's signature, so `spread` starts it in its place (a spawned process
    imports this module by name: the test's directory is on the sys.path it is given)."""
    from sglang_mx.bench.load import loadgen

    if index == EARLY_WORKER:
        loadgen.asyncio = _EarlyAsyncio()
    loadgen._worker(conn, cfg, model, jobs, concurrency, index)
