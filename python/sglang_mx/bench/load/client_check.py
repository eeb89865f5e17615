"""The load generator checks itself: did it send on time, and how busy was it?

- schedule lag: per request, actual send time minus intended send time (its arrival in an
  open-loop trace; the moment it became free to go in a closed loop: a concurrency slot or its
  previous turn), min / p50 / p99 / max; a send more than EARLY_LIMIT_S before it was due is
  early (a closed loop once sent before the shared t0), and one early send flags the run;
- event-loop lag: a probe task that asks to sleep PROBE_S and records how late it woke (every
  parsed SSE chunk and JSON body runs on that one loop, so a late probe is a busy client);
- client CPU: each load process's CPU seconds over the run's wall seconds (1.0 = one core); a
  run spread over processes (loadgen.py) is judged by its busiest one.

A run is flagged client-bound when its schedule lag p99 exceeds LAG_LIMIT_S, its event-loop lag
p99 exceeds LOOP_LAG_LIMIT_S (looser: a server in the client's own process, as in the tests,
holds the GIL for ms at a time without delaying sends much), the client used more than
CPU_LIMIT of a core, any request went out early, or (given a calibration, calibrate.py) its
request or streamed-token rate came within NEAR_CEILING of the client's measured ceiling. A
flagged run measured the client as much as the server."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sglang_mx.measure.metrics import RequestResult, percentile
from sglang_mx.measure.run_checks import Lag, SelfCheck

PROBE_S = 0.005
LAG_LIMIT_S = 0.010
LOOP_LAG_LIMIT_S = 0.050
CPU_LIMIT = 0.90
NEAR_CEILING = 0.80
# From the clocks, not from a run: a request is sent once the loop wakes its timer, which asyncio
# fires at most the clock's resolution early (1 ns on Linux; the loop's clock and perf_counter
# are both CLOCK_MONOTONIC), so a lag below -1 ms is a send before its time, never noise.
EARLY_LIMIT_S = 0.001


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


def _dist(values: Sequence[float]) -> Lag:
    return Lag(
        min=min(values) if values else float("nan"),
        p50=percentile(values, 50),
        p99=percentile(values, 99),
        max=max(values) if values else float("nan"),
        n=len(values),
    )


def ceiling_for(calibration: dict, processes: int) -> tuple[dict, str]:
    """The client's ceiling at `processes` load processes: measured at that count where the
    calibration has it (`by_processes`), else the one-process ceiling times `processes` (an
    upper bound: processes share the box's cores). Returns (ceiling, basis)."""
    measured = (calibration.get("by_processes") or {}).get(str(processes))
    if measured:
        return measured, f"measured at {processes} process(es)"
    if processes == 1:
        return calibration, "measured at 1 process"
    scaled = {k: calibration[k] * processes for k in ("req_s", "tok_s") if calibration.get(k)}
    return scaled, f"1-process ceiling x {processes} (not measured at {processes})"


def processes_needed(req_s: float, tok_s: float, calibration: dict) -> tuple[int, str]:
    """The fewest load processes that keep an offered `req_s` and streamed `tok_s` under
    NEAR_CEILING of the client's ceiling: the smallest count measured (`by_processes`) that
    does, else the one-process ceiling shared out (ceil(load / (NEAR_CEILING x ceiling))).
    Returns (processes, basis)."""
    measured = sorted((int(n), c) for n, c in (calibration.get("by_processes") or {}).items() if c)
    for n, c in measured:
        if all(load <= NEAR_CEILING * c[k] for k, load in (("req_s", req_s), ("tok_s", tok_s))):
            return n, f"the calibration's ceiling at {n} process(es) covers it"
    loads = (("req_s", req_s), ("tok_s", tok_s))
    need = max(math.ceil(load / (NEAR_CEILING * calibration[k])) for k, load in loads
               if calibration.get(k))  # fmt: skip
    if measured and need <= measured[-1][0]:
        need = measured[-1][0] + 1  # every measured count fell short
    return max(1, need), (
        f"the one-process ceiling ({calibration['req_s']:.4g} req/s, "
        f"{calibration['tok_s']:.4g} tok/s) x {NEAR_CEILING:.0%}, shared out (not measured at "
        "that count)"
    )


def selfcheck(
    results: Sequence[RequestResult],
    loop_late: Sequence[float],
    cpu_s: Sequence[float],
    wall_s: float,
    rates: tuple[float, float] = (math.nan, math.nan),
    calibration: dict | None = None,
) -> SelfCheck:
    """The self-check record of one run from `len(cpu_s)` load processes (each one's CPU
    seconds); `rates` its (request_throughput, output_tok_s) and `calibration` calibrate.py's
    ceiling, if known, which the rates are held against."""
    lags = [r.lag for r in results if r.lag == r.lag]  # NaN: never sent
    sched, loop = _dist(lags), _dist(loop_late)
    processes = len(cpu_s)
    per_process = [c / wall_s if wall_s > 0 else float("nan") for c in cpu_s]
    cpu = max(per_process)
    reasons = []
    if sched.n and sched.p99 > LAG_LIMIT_S:
        reasons.append(f"schedule lag p99 {sched.p99 * 1e3:.1f} ms > {LAG_LIMIT_S * 1e3:.0f} ms")
    early = [x for x in lags if x < -EARLY_LIMIT_S]
    if early:
        reasons.append(
            f"{len(early)} of {len(lags)} requests sent early (schedule lag min "
            f"{sched.min * 1e3:.1f} ms < -{EARLY_LIMIT_S * 1e3:.0f} ms): the load generator "
            "ran ahead of its schedule"
        )
    if loop.n and loop.p99 > LOOP_LAG_LIMIT_S:
        reasons.append(
            f"event-loop lag p99 {loop.p99 * 1e3:.1f} ms > {LOOP_LAG_LIMIT_S * 1e3:.0f} ms"
        )
    if cpu > CPU_LIMIT:
        busiest = " (busiest of its processes)" if processes > 1 else ""
        reasons.append(f"client CPU {cpu:.0%} of a core{busiest} > {CPU_LIMIT:.0%}")
    basis = None
    if calibration:
        limit, basis = ceiling_for(calibration, processes)
        named = (("req_s", "request_throughput"), ("tok_s", "output_tok_s"))
        for (key, mine), value in zip(named, rates, strict=True):
            ceiling = limit.get(key)
            if ceiling and value and value >= NEAR_CEILING * ceiling:
                reasons.append(
                    f"{mine} {value:.4g} is {value / ceiling:.0%} of the client's calibrated "
                    f"ceiling {ceiling:.4g}, {basis} (>= {NEAR_CEILING:.0%})"
                )
    return SelfCheck(
        schedule_lag_s=sched,
        early_sends=len(early),
        loop_lag_s=loop,
        client_cpu_s=sum(cpu_s),
        wall_s=wall_s,
        client_cpu_fraction=cpu,
        processes=processes,
        client_cpu_fraction_by_process=tuple(per_process),
        calibration=calibration or None,
        ceiling_basis=basis,
        client_bound=bool(reasons),
        reasons=tuple(reasons),
    )
