"""Discrete-event driver: a trace's requests arrive (open loop at their arrival times, or closed
loop at a fixed concurrency, as `sglang-mx bench` sends them), are dispatched round-robin over
DP ranks (SGLang's default load_balance_method), and each group of ranks that share a clock
(one engine, or the ranks of one DP-attention engine, which step in lockstep) runs steps whose
duration the step-cost model gives."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_mx.measure.metrics import RequestResult
from sglang_mx.measure.tracegen import Trace
from sglang_mx.plan.engine import Engine, Planned
from sglang_mx.plan.request import SimRequest
from sglang_mx.plan.scheduler_config import SchedulerConfig
from sglang_mx.plan.stepcost import StepTerms, Work

CostFn = Callable[[list[Work]], StepTerms]


@dataclass
class StepRecord:
    group: int
    start: float
    seconds: float
    binding: str  # compute | hbm | interconnect | scheduler | kv-capacity
    prefill_tokens: int
    decode_rows: int
    running: int  # requests in the running (decoding) batches, whether or not this step decodes
    kv_usage: float


@dataclass
class Group:
    """Engines that step together on one clock, and what their step costs."""

    engines: list[Engine]
    cost: CostFn
    busy_until: float = 0.0
    plans: list[Planned] | None = None


@dataclass
class SimResult:
    requests: list[SimRequest]
    steps: list[StepRecord] = field(default_factory=list)
    retractions: int = 0

    def request_results(self, frontend_s: float = 0.0) -> list[RequestResult]:
        """The same records `sglang-mx bench` measures, so bench's summarize() applies;
        `frontend_s` (HTTP, tokenizer, detokenizer) is added once to TTFT and E2E."""
        out = []
        for r in self.requests:
            times = [r.first_token] + r.token_times[1:] if r.token_times else []
            # a stream arrives in order: a first token held back holds back the ones after it
            times = list(itertools.accumulate(times, max))
            itl = [b - a for a, b in itertools.pairwise(times)]
            out.append(
                RequestResult(
                    request_id=r.id,
                    start=r.start,
                    ttft=r.first_token - r.start + frontend_s,
                    e2e=max(r.finish, times[-1] if times else r.finish) - r.start + frontend_s,
                    itl=itl,
                    prompt_tokens=r.input_len,
                    completion_tokens=r.out,
                    cached_tokens=max(r.cached, 0),
                    expected_cached=r.expected_cached,
                    error="" if not math.isnan(r.finish) else "not finished in the simulation",
                )
            )
        return out

    def binding_share(self) -> dict[str, float]:
        """Share of simulated busy time each resource bound."""
        total: dict[str, float] = {}
        for s in self.steps:
            total[s.binding] = total.get(s.binding, 0.0) + s.seconds
        busy = sum(total.values()) or 1.0
        return {k: v / busy for k, v in sorted(total.items())}

    def binding_timeline(self, bins: int = 20) -> list[dict]:
        """Binding resource per time bin (the one holding most of the bin's step time)."""
        if not self.steps:
            return []
        end = max(s.start + s.seconds for s in self.steps)
        width = end / bins if end > 0 else 1.0
        rows = [dict() for _ in range(bins)]
        for s in self.steps:
            b = min(int(s.start / width), bins - 1)
            rows[b][s.binding] = rows[b].get(s.binding, 0.0) + s.seconds
        return [
            {"t0": i * width, "t1": (i + 1) * width, "binding": max(r, key=r.get) if r else "idle"}
            for i, r in enumerate(rows)
        ]


def requests_from_trace(trace: Trace) -> list[SimRequest]:
    return [
        SimRequest(
            id=r.id,
            runs=list(r.segments),
            output_len=r.output_len,
            arrival=r.arrival_s or 0.0,
            after=r.after,
            expected_cached=r.expected_cached,
        )
        for r in trace.requests
    ]


def simulate(
    trace: Trace,
    groups: list[Group],
    max_sim_s: float = 36000.0,
    handoff_s: Callable[[SimRequest], float] | None = None,
    handoff_serial_s: Callable[[SimRequest], float] | None = None,
    first_token_lag: float = 0.0,
    lag_draw: Callable[[SimRequest], float] | None = None,
) -> SimResult:
    """Run `trace` through `groups` (ranks are numbered across groups in order).

    With PD groups (SGLang 0.5.23 disaggregation/prefill.py, decode.py, mooncake/conn.py) the
    router pairs each request with a prefill and a decode engine at arrival; prefill admits it
    once the decode scheduler has pre-allocated its KV (the bootstrap notification, sent from
    the decode loop between two forwards); after prefill the KV leaves when the result is
    processed (on a CPU device, after the next prefill forward, as tokens are) and arrives
    `handoff_s(r)` later; the decode scheduler takes it in at its next loop iteration and only
    then streams the first token. `handoff_serial_s(r)` of that is the part one transfer lane
    does at a time: SGLang's mooncake sender puts every transfer to one decode session on one
    queue served by one worker (mooncake/conn.py: shard by the session's port), so a pair of
    prefill and decode ranks moves one request's KV after another; the rest overlaps.
    `first_token_lag` x the decode step that starts as a transferred request joins is how late
    its first token reaches the client (measured on a CPU decode server, pd_decode.py, where
    the detokenizer and HTTP server share the core of the scheduler that starts that step);
    `lag_draw(r)`, when given, scales that lag per request (a draw of mean 1: a tail)."""
    reqs = requests_from_trace(trace)
    ranks = [(g, e) for g in groups for e in g.engines if e.role != "decode"]
    decoders = [(g, e) for g in groups for e in g.engines if e.role == "decode"]
    drr = itertools.count()
    moving: list[tuple[float, int, SimRequest]] = []  # (arrives at decode side, order, request)
    booting: list[tuple[float, int, SimRequest]] = []  # (decode side pre-allocated it, ...)
    rr = itertools.count()
    for key, n in trace.prime:  # bench primes each shared prefix once, round-robin like the rest
        _, eng = ranks[next(rr) % len(ranks)]
        eng.cache.insert([(key, n)], -1.0)
    by_id = {r.id: r for r in reqs}
    closed = trace.spec.arrival == "concurrency"
    pending: list[tuple[float, int, SimRequest]] = []  # (release time, order, request)
    order = itertools.count()
    blocked: dict[str, list[SimRequest]] = {}
    queue = list(reqs)
    if closed:
        for r in queue[: trace.spec.concurrency]:
            heapq.heappush(pending, (0.0, next(order), r))
        queue = queue[trace.spec.concurrency :]
    else:
        for r in reqs:
            if r.after and r.after in by_id:
                blocked.setdefault(r.after, []).append(r)
            else:
                heapq.heappush(pending, (r.arrival, next(order), r))
    result = SimResult(reqs)
    now = 0.0
    finished: list[SimRequest] = []  # of the step that just completed
    emitted: list[tuple[SimRequest, int]] = []
    leaving: list[SimRequest] = []  # prefilled PD requests whose KV is about to be sent
    lane_free: dict[tuple[int, int], float] = {}  # (prefill rank, decode rank) -> lane free at
    done_group: Group | None = None

    def release(done: SimRequest, t: float) -> None:
        if closed and queue:
            heapq.heappush(pending, (t, next(order), queue.pop(0)))
        for nxt in blocked.pop(done.id, []):
            heapq.heappush(pending, (max(nxt.arrival, t), next(order), nxt))

    while True:
        busy = [g for g in groups if g.plans is not None]
        t_step = min((g.busy_until for g in busy), default=math.inf)
        t_arr = pending[0][0] if pending else math.inf
        t_move = moving[0][0] if moving else math.inf
        t_boot = booting[0][0] if booting else math.inf
        if math.isinf(min(t_step, t_arr, t_move, t_boot)):
            break
        if t_move <= min(t_arr, t_step, t_boot):
            now = t_move
            while moving and moving[0][0] <= now:  # all that landed by now, together
                _, _, r = heapq.heappop(moving)
                r.kv_landed = now
                decoders[r.decode_rank][1].add(r)
        elif t_boot <= min(t_arr, t_step):
            now = t_boot
            while booting and booting[0][0] <= now:
                _, _, r = heapq.heappop(booting)
                r.bootstrapped = now
                ranks[r.rank][1].add(r)
        elif t_arr <= t_step:
            now = t_arr
            while pending and pending[0][0] <= now:  # the scheduler receives all that queued
                _, _, r = heapq.heappop(pending)
                r.start = now
                r.rank = next(rr) % len(ranks)
                if not decoders:
                    ranks[r.rank][1].add(r)
                    continue
                r.decode_rank = next(drr) % len(decoders)
                g = decoders[r.decode_rank][0]
                # the decode loop pre-allocates between forwards: after its running step
                ready = g.busy_until if g.plans is not None else now
                heapq.heappush(booting, (ready, next(order), r))
        else:
            now = t_step
            g = min(busy, key=lambda x: x.busy_until)
            for eng, plan in zip(g.engines, g.plans, strict=True):
                finished += eng.complete(plan, now)
                emitted += eng.given
                leaving += eng.handoff
                eng.handoff.clear()
            g.plans, done_group = None, g
        if now > max_sim_s:
            break
        for gi, g in enumerate(groups):
            if g.plans is None and any(e.busy for e in g.engines):
                _start(g, gi, now, result, first_token_lag, lag_draw)
        if done_group is not None:
            sent = now
            if done_group.plans is not None and done_group.engines[0].cfg.sync_forward:
                sent = done_group.busy_until  # sent after the next forward (CPU overlap loop)
                for r, first in emitted:
                    _defer(r, first, now, sent)
            for done in finished:
                release(done, sent)
            for r in leaving:  # the KV goes when the result is processed, as the tokens do
                lane = (r.rank, r.decode_rank)
                start = max(sent, lane_free.get(lane, 0.0))  # after the lane's earlier ones
                r.kv_sent = sent
                serial = handoff_serial_s(r) if handoff_serial_s else 0.0
                lane_free[lane] = start + serial
                delay = handoff_s(r) if handoff_s else 0.0
                heapq.heappush(moving, (start + delay, next(order), r))
            finished, emitted, leaving, done_group = [], [], [], None
    result.retractions = sum(e.retractions for _, e in ranks + decoders)
    return result


def _defer(r: SimRequest, first: int, t: float, sent: float) -> None:
    """The tokens from index `first` on (the first token among them; the finish, when recorded
    at `t`) reach the client at `sent` instead of `t`."""
    r.token_times[first:] = [sent] * (len(r.token_times) - first)
    if first == 0:
        r.first_token = sent
    if r.finish == t:
        r.finish = sent


def _start(
    g: Group,
    gi: int,
    now: float,
    result: SimResult,
    lag: float = 0.0,
    draw: Callable[[SimRequest], float] | None = None,
) -> None:
    plans = [e.schedule(now) for e in g.engines]
    if all(p.empty for p in plans):
        return
    terms = g.cost([p.work() for p in plans])
    kv = any(p.kv_limited for p in plans)
    g.plans, g.busy_until = plans, now + terms.seconds
    for r in (r for e in g.engines for r in e.joined) if lag else ():
        r.first_token += lag * terms.seconds * (draw(r) if draw else 1.0)
        if r.token_times:
            r.token_times[0] = r.first_token
    result.steps.append(
        StepRecord(
            group=gi,
            start=now,
            seconds=terms.seconds,
            binding="kv-capacity" if kv else terms.binding,
            prefill_tokens=sum(n for p in plans for _, _, n in p.prefill),
            decode_rows=sum(len(p.decode) for p in plans),
            running=sum(len(e.running) for e in g.engines),
            kv_usage=max(e.usage() for e in g.engines),
        )
    )


def build_groups(
    cfg: SchedulerConfig,
    cost: CostFn,
    engines_per_group: int = 1,
    groups: int = 1,
    emitted_per_decode: float = 1.0,
    role: str = "both",
) -> list[Group]:
    return [
        Group([Engine(cfg, emitted_per_decode, role) for _ in range(engines_per_group)], cost)
        for _ in range(groups)
    ]
