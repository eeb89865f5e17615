"""Trace generator: turns a WorkloadSpec into a seeded, replayable JSONL trace whose prompts are
built from named segments, so the cached share of every prompt is known exactly in advance.

A prompt is a list of (segment key, length); a segment's tokens are a deterministic function of
its key (see prompts.py), so equal keys give equal token prefixes and different keys diverge at
their first token. Turn 1 = shared prefix of its group + a unique user part; turn k repeats turn
k-1's prompt, the replayed assistant answer of turn k-1 and a new user part, so its cached part
is exactly turn k-1's prompt. The shared-prefix length is solved so the trace-wide hit rate,
sum(cached) / sum(prompt), equals the target."""

from __future__ import annotations

import datetime as _dt
import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sglang_mx.capacity.workload import WorkloadSpec

TRACE_VERSION = 1
SESSION_WAVE = 8  # sessions interleaved at once, so a turn's predecessor has usually finished
HIT_TOLERANCE = 0.005  # designed vs target hit rate; integer lengths allow no better on tiny traces


@dataclass
class TraceRequest:
    id: str
    session: int
    turn: int
    segments: list[tuple[str, int]]
    output_len: int
    expected_cached: int
    arrival_s: float | None = None
    after: str | None = None  # id of the request that must finish first (previous turn)

    @property
    def input_len(self) -> int:
        return sum(n for _, n in self.segments)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["segments"] = [list(s) for s in self.segments]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TraceRequest:
        d = dict(d)
        d["segments"] = [(str(k), int(n)) for k, n in d["segments"]]
        return cls(**d)


@dataclass
class Trace:
    spec: WorkloadSpec
    prefix_len: int
    prime: list[tuple[str, int]]
    requests: list[TraceRequest] = field(default_factory=list)
    created: str = ""
    source: dict = field(default_factory=dict)  # a replayed file: its path, format, options

    @property
    def predicted_hit_rate(self) -> float:
        prompt = sum(r.input_len for r in self.requests)
        return sum(r.expected_cached for r in self.requests) / prompt if prompt else math.nan

    def header(self) -> dict:
        return {
            "trace_version": TRACE_VERSION,
            "spec": self.spec.to_dict(),
            "prefix_len": self.prefix_len,
            "prime": [list(p) for p in self.prime],
            "predicted_hit_rate": self.predicted_hit_rate,
            "created": self.created,
            "source": self.source,
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as f:
            f.write(json.dumps({"header": self.header()}) + "\n")
            for r in self.requests:
                f.write(json.dumps(r.to_dict()) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        lines = Path(path).read_text().splitlines()
        head = json.loads(lines[0]).get("header")
        if not head or head.get("trace_version") != TRACE_VERSION:
            raise ValueError(f"{path}: not a sglang-mx trace (version {TRACE_VERSION})")
        return cls(
            spec=WorkloadSpec.from_dict(head["spec"]),
            prefix_len=head["prefix_len"],
            prime=[(str(k), int(n)) for k, n in head["prime"]],
            requests=[TraceRequest.from_dict(json.loads(x)) for x in lines[1:] if x.strip()],
            created=head.get("created", ""),
            source=head.get("source") or {},
        )


@dataclass
class _Session:
    index: int
    group: int
    mean_len: int
    outputs: list[int]


def _sessions(spec: WorkloadSpec) -> list[_Session]:
    rng = random.Random(spec.seed)
    out, left, i = [], spec.num_requests, 0
    while left > 0:
        turns = min(spec.turns, left)
        mean_len = spec.input_len.sample(rng)
        outputs = [spec.output_len.sample(rng) for _ in range(turns)]
        out.append(_Session(i, i % spec.prefix_groups, mean_len, outputs))
        left -= turns
        i += 1
    return out


def _order(spec: WorkloadSpec, sessions: list[_Session]) -> list[tuple[int, int]]:
    """(session, turn) in dispatch order: waves of sessions, turn by turn within a wave."""
    order = []
    for w in range(0, len(sessions), SESSION_WAVE):
        wave = sessions[w : w + SESSION_WAVE]
        for t in range(spec.turns):
            order += [(s.index, t) for s in wave if t < len(s.outputs)]
    return order


def _build(spec: WorkloadSpec, sessions: list[_Session], prefix: int) -> list[TraceRequest]:
    by_key: dict[tuple[int, int], TraceRequest] = {}
    for s in sessions:
        pkey = f"g{s.group}"
        if spec.turns == 1:
            shared = min(prefix, s.mean_len - 1)
            segs = [(pkey, shared), (f"s{s.index}u0", s.mean_len - shared)]
            by_key[(s.index, 0)] = TraceRequest(
                f"s{s.index}t0", s.index, 0, [x for x in segs if x[1]], s.outputs[0], shared
            )
            continue
        step = max(1, round((s.mean_len - prefix) * 2 / (spec.turns + 1)))
        segs = [(pkey, prefix)] if prefix else []
        cached = prefix
        for t, out_len in enumerate(s.outputs):
            if t == 0:
                segs = segs + [(f"s{s.index}u0", step)]
            else:
                prev_out = s.outputs[t - 1]
                segs = segs + [(f"s{s.index}a{t - 1}", prev_out)]
                segs = segs + [(f"s{s.index}u{t}", max(1, step - prev_out))]
            after = f"s{s.index}t{t - 1}" if t else None
            by_key[(s.index, t)] = TraceRequest(
                f"s{s.index}t{t}", s.index, t, list(segs), out_len, cached, after=after
            )
            cached = sum(n for _, n in segs)
    ordered = [by_key[k] for k in _order(spec, sessions)]
    if not spec.prime:
        _unprimed(ordered)
    return ordered


def _unprimed(requests: list[TraceRequest]) -> None:
    """Without priming, a shared prefix is cached only from its group's second use onwards."""
    seen: dict[str, int] = {}
    for r in requests:
        if r.turn:
            continue
        key, n = r.segments[0]
        if key.startswith("g"):
            r.expected_cached = min(r.expected_cached, seen.get(key, 0))
            seen[key] = max(seen.get(key, 0), n)
        else:
            r.expected_cached = 0


def _hit(requests: list[TraceRequest]) -> float:
    prompt = sum(r.input_len for r in requests)
    return sum(r.expected_cached for r in requests) / prompt


def generate(spec: WorkloadSpec) -> Trace:
    """Seeded trace for `spec`: the shared-prefix length is bisected to hit spec.hit_rate."""
    sessions = _sessions(spec)
    lo, hi = 0, max(s.mean_len for s in sessions)
    while lo < hi:
        mid = (lo + hi) // 2
        if _hit(_build(spec, sessions, mid)) < spec.hit_rate:
            lo = mid + 1
        else:
            hi = mid
    # lo is the first length at or above the target; its predecessor may be closer
    best = min(
        (max(lo - 1, 0), lo),
        key=lambda n: abs(_hit(_build(spec, sessions, n)) - spec.hit_rate),
    )
    requests = _build(spec, sessions, best)
    got = _hit(requests)
    if abs(got - spec.hit_rate) > HIT_TOLERANCE:
        raise ValueError(
            f"hit rate {spec.hit_rate} is out of reach for this spec (closest {got:.3f}): "
            + ("use fewer turns" if got > spec.hit_rate else "use more turns or longer inputs")
        )
    _arrivals(spec, requests)
    groups = sorted({r.segments[0] for r in requests if r.turn == 0 and r.segments[0][0][0] == "g"})
    prime = [g for g in groups if g[1] > 0] if spec.prime else []
    # one priming request per group, at its longest use
    longest: dict[str, int] = {}
    for key, n in prime:
        longest[key] = max(longest.get(key, 0), n)
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return Trace(spec, best, sorted(longest.items()), requests, created)


def _arrivals(spec: WorkloadSpec, requests: list[TraceRequest]) -> None:
    rng = random.Random(spec.seed + 1)
    t = 0.0
    for i, r in enumerate(requests):
        if spec.arrival == "poisson":
            t = t + rng.expovariate(spec.rate) if i else 0.0
            r.arrival_s = t
        elif spec.arrival == "fixed-rate":
            r.arrival_s = i / spec.rate
        else:
            r.arrival_s = None
