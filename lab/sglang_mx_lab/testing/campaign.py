"""A hostile-request campaign against a supervised SGLang server: generated requests
(`hostile.py`), every failure classified (worker death with the scheduler's exception, 5xx,
traceback), the worker waited for while its supervisor restarts it, and each crasher shrunk to
the fewest fields that still fail. Used by `make fuzz` (scripts/fuzz.py) and
benchmark/guards.py; the test suite runs the bounded form directly (test_hostile_campaign.py).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed

from sglang_mx_lab.testing.hostile import (
    SGLANG_ROUTES,
    HostileRequest,
    Outcome,
    Target,
    attack,
    hostile_requests,
)


class Worker(Protocol):
    """What a campaign needs of the server it attacks: SupervisedServer, or the fake faulty
    worker its own tests use (fake_worker.py)."""

    base_url: str

    def log_size(self) -> int: ...

    def last_exception(self, since: int) -> str: ...

    def wait_healthy(self, timeout: float = 300.0) -> float: ...


@dataclass
class Crash:
    failure: str  # worker_death / http_5xx / traceback / no_answer
    cause: str  # the server log's last exception line, for a death
    request: HostileRequest  # shrunk
    restart_s: float | None = None
    original: HostileRequest | None = None  # as generated, before shrinking

    @property
    def crash_class(self) -> str:
        # Numbers vary per request (ids, sizes); the class is the exception with them masked.
        return re.sub(r"-?\d+", "N", f"{self.failure}: {self.cause}")[:200]


@dataclass
class CampaignResult:
    tried: int = 0
    deaths: int = 0
    crashes: list[Crash] = field(default_factory=list)
    restart_s: list[float] = field(default_factory=list)

    @property
    def classes(self) -> dict[str, Crash]:
        out: dict[str, Crash] = {}
        for c in self.crashes:
            out.setdefault(c.crash_class, c)
        return out


# Fields that keep a request short: dropping them turns any request into a long generation,
# which would "shrink" every timeout into the same valid-but-slow request.
_KEEP = frozenset({"model", "max_tokens", "max_new_tokens"})


def _shrink_candidates(req: HostileRequest) -> list[HostileRequest]:
    """The request with one field (or one sampling_params field) removed, each."""
    try:
        body = json.loads(req.body)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than json can read
        return []
    if not isinstance(body, dict):
        return []
    out = []
    for key in list(body):
        if key in _KEEP or key == "sampling_params":
            continue
        smaller = {k: v for k, v in body.items() if k != key}
        out.append(HostileRequest(req.route, json.dumps(smaller), req.content_type))
    sp = body.get("sampling_params")
    if isinstance(sp, dict):
        for key in list(sp):
            if key in _KEEP:
                continue
            smaller = {**body, "sampling_params": {k: v for k, v in sp.items() if k != key}}
            out.append(HostileRequest(req.route, json.dumps(smaller), req.content_type))
    return out


class Campaign:
    def __init__(
        self,
        server: Worker,
        target: Target,
        shrink_budget: int = 12,
        timeout_s: float = 60.0,
        settle_s: float = 1.0,
    ) -> None:
        self.server = server
        self.target = target
        self.shrink_budget = shrink_budget
        self.settle_s = settle_s  # after a death: let the dying scheduler's traceback reach the log
        self.result = CampaignResult()
        self.client = httpx.Client(timeout=timeout_s)  # no answer within it: a hang

    def _try(self, req: HostileRequest) -> tuple[Outcome, str, float | None]:
        mark = self.server.log_size()
        out = attack(self.client, self.server.base_url, req, self.server.base_url)
        cause, restart = "", None
        if not out.healthy:
            self.result.deaths += 1
            time.sleep(self.settle_s)
            cause = self.server.last_exception(mark)
            restart = self.server.wait_healthy()
            self.result.restart_s.append(restart)
        elif out.failed:
            cause = out.text[:200]
        return out, cause, restart

    def _shrink(self, req: HostileRequest, failure: str) -> HostileRequest:
        budget = self.shrink_budget
        improved = True
        while improved and budget > 0:
            improved = False
            for cand in _shrink_candidates(req):
                if budget <= 0:
                    break
                budget -= 1
                self.result.tried += 1
                out, _, _ = self._try(cand)
                if out.failure == failure:
                    req, improved = cand, True
                    break
        return req

    def one(self, req: HostileRequest, on_crash: Callable[[Crash], None] | None = None) -> None:
        self.result.tried += 1
        out, cause, restart = self._try(req)
        if not out.failed:
            return
        crash = Crash(out.failure or "", cause, req, restart)
        known = crash.crash_class in self.result.classes
        if not known and self.shrink_budget:
            crash.original = req
            crash.request = self._shrink(req, crash.failure)
        self.result.crashes.append(crash)
        if not known and on_crash is not None:
            on_crash(crash)

    def run(
        self,
        n: int,
        seed: int,
        routes: tuple[str, ...] = SGLANG_ROUTES,
        on_crash: Callable[[Crash], None] | None = None,
        budget_s: float | None = None,
        min_n: int = 0,
    ) -> CampaignResult:
        for_each_hostile(
            routes, self.target, n, seed, lambda req: self.one(req, on_crash), budget_s, min_n
        )
        return self.result


class _OutOfTime(BaseException):
    """Ends a hypothesis run at its time budget (hypothesis lets a BaseException through at
    once; an Exception would be reported as a failing example)."""


def for_each_hostile(
    routes: tuple[str, ...],
    target: Target,
    n: int,
    seed: int,
    fn: Callable[[HostileRequest], None],
    budget_s: float | None = None,
    min_n: int = 0,
) -> int:
    """Call fn on up to n generated hostile requests, stopping early once budget_s seconds have
    passed and at least min_n were sent (a slow machine still covers that many); returns how
    many it sent. Fixed seed, so for the same n (hypothesis schedules its generation by it) a
    budget only cuts the same sequence shorter; no example database, no shrinking (a crasher is
    minimized by the campaign itself), no health checks on slow servers."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    done = 0

    @hseed(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(hostile_requests(routes, target))
    def go(req):
        nonlocal done
        if deadline is not None and done >= min_n and time.monotonic() >= deadline:
            raise _OutOfTime
        done += 1
        fn(req)

    try:
        go()
    except _OutOfTime:
        pass
    return done


def assert_no_hostile_request_fails(
    url: str, target: Target, n: int, seed: int, budget_s: float, min_n: int
) -> tuple[int, float]:
    """The suite's bounded campaign against a live server: every generated hostile request to
    SGLang's routes (for_each_hostile) answered as it should be, else an AssertionError naming
    the request and the answer. Returns (requests sent, seconds)."""

    with httpx.Client(timeout=60) as client:

        def one(req: HostileRequest) -> None:
            out = attack(client, url, req, url)
            assert not out.failed, f"{out.failure}: {req} -> {out.status} {out.text[:300]}"

        t0 = time.monotonic()
        sent = for_each_hostile(SGLANG_ROUTES, target, n, seed, one, budget_s, min_n)
    return sent, time.monotonic() - t0


def save_regression(crash: Crash, out_dir: Path, model: str) -> Path:
    """A replayable JSON case; the served model's name is a placeholder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", crash.crash_class.lower()).strip("-")[:60]
    req = crash.request
    body = req.body.replace(json.dumps(model), '"{{model}}"')  # the quoted name only
    case = {
        "failure": crash.failure,
        "cause": crash.cause,
        "found": time.strftime("%Y-%m-%d"),
        "request": HostileRequest(req.route, body, req.content_type).to_json(),
    }
    if crash.original is not None and crash.original != req:
        case["original_request"] = crash.original.to_json()
    path = out_dir / f"{slug}.json"
    path.write_text(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
    return path
