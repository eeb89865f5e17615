"""The load generator checks itself: did it send on time, and how busy was it?

- schedule lag: per request, actual send time minus intended send time (its arrival in an
  open-loop trace; the moment it became free to go in a closed loop: a concurrency slot or its
  previous turn), p50 / p99 / max;
- event-loop lag: a probe task that asks to sleep PROBE_S and records how late it woke (every
  parsed SSE chunk and JSON body runs on that one loop, so a late probe is a busy client);
- client CPU: the process's CPU seconds over the run's wall seconds (1.0 = one core).

A run is flagged client-bound when its schedule lag p99 exceeds LAG_LIMIT_S, its event-loop lag
p99 exceeds LOOP_LAG_LIMIT_S (looser: a server in the client's own process, as in the tests,
holds the GIL for ms at a time without delaying sends much), the client used more than
CPU_LIMIT of a core, or (given a calibration, calibrate.py) its request or streamed-token rate
came within NEAR_CEILING of the client's measured ceiling. A flagged run measured the client
as much as the server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sglang_mx.bench.metrics import RequestResult, percentile

PROBE_S = 0.005
LAG_LIMIT_S = 0.010
LOOP_LAG_LIMIT_S = 0.050
CPU_LIMIT = 0.90
NEAR_CEILING = 0.80


class Background:
    """A coroutine `_loop` run as a task beside a run: `start()` launches it, `stop()` cancels it
    and waits for it to end. Subclasses hold the task in a `_task` field (None until started)."""

    _task: asyncio.Task | None

    async def _loop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass


@dataclass
class LoopProbe(Background):
    """Measures how late the event loop wakes a sleeper, while a run goes."""

    late: list[float] = field(default_factory=list)
    _task: asyncio.Task | None = None

    async def _loop(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            self.late.append(max(0.0, time.perf_counter() - t - PROBE_S))


@dataclass
class CpuClock:
    """Process CPU seconds and wall seconds since `start()`."""

    cpu0: float = 0.0
    wall0: float = 0.0

    def start(self) -> None:
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()

    def read(self) -> tuple[float, float]:
        return time.process_time() - self.cpu0, time.perf_counter() - self.wall0


def _dist(values: Sequence[float]) -> dict:
    return {
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
        "n": len(values),
    }


def selfcheck(
    results: Sequence[RequestResult],
    loop_late: Sequence[float],
    cpu_s: float,
    wall_s: float,
    summary: dict,
    calibration: dict | None = None,
) -> dict:
    """The self-check record of one run; `calibration` is calibrate.py's ceiling, if known."""
    lags = [r.lag for r in results if r.lag == r.lag]  # NaN: never sent
    sched, loop = _dist(lags), _dist(loop_late)
    cpu = cpu_s / wall_s if wall_s > 0 else float("nan")
    reasons = []
    if sched["n"] and sched["p99"] > LAG_LIMIT_S:
        reasons.append(f"schedule lag p99 {sched['p99'] * 1e3:.1f} ms > {LAG_LIMIT_S * 1e3:.0f} ms")
    if loop["n"] and loop["p99"] > LOOP_LAG_LIMIT_S:
        reasons.append(
            f"event-loop lag p99 {loop['p99'] * 1e3:.1f} ms > {LOOP_LAG_LIMIT_S * 1e3:.0f} ms"
        )
    if cpu > CPU_LIMIT:
        reasons.append(f"client CPU {cpu:.0%} of a core > {CPU_LIMIT:.0%}")
    if calibration:
        for key, mine in (("req_s", "request_throughput"), ("tok_s", "output_tok_s")):
            ceiling = calibration.get(key)
            value = summary.get(mine)
            if ceiling and value and value >= NEAR_CEILING * ceiling:
                reasons.append(
                    f"{mine} {value:.4g} is {value / ceiling:.0%} of the client's calibrated "
                    f"ceiling {ceiling:.4g} (>= {NEAR_CEILING:.0%})"
                )
    return {
        "schedule_lag_s": sched,
        "loop_lag_s": loop,
        "client_cpu_s": cpu_s,
        "wall_s": wall_s,
        "client_cpu_fraction": cpu,
        "calibration": calibration or None,
        "client_bound": bool(reasons),
        "reasons": reasons,
    }
