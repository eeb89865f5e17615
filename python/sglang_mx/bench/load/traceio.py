"""`bench run --trace FILE`: any supported trace file into a replayable Trace.

Formats (`--trace-format`, or detected from the content): `sglang-mx` (our own JSONL, tracegen),
`mooncake`, `azure`, `burstgpt` (traces_public.py) and `ledger` (the provider's export,
traces_ledger.py). Options: `time_scale` multiplies every arrival time (0.5 replays twice as
fast), `sample` keeps each request with that probability (seeded, order kept), `max_requests`
caps the replay, `length_scale` multiplies every length (and Mooncake's block size), which is how
`--fit-context` fits a trace into a small server.

The expected cached tokens of each request are what its earlier requests (and the priming
requests) left in a prefix cache, walked in arrival order: its leading run of segments already
seen at the same position. The runner compares that with the `cached_tokens` the server reports."""

from __future__ import annotations

import datetime as _dt
import json
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from sglang_mx.bench.load.limits import PROMPT_RESERVE, fits, longest_request
from sglang_mx.bench.load.reach import SegmentCache
from sglang_mx.bench.load.traces_ledger import read_ledger
from sglang_mx.bench.load.traces_public import (
    Rows,
    TraceFormatError,
    read_azure,
    read_burstgpt,
    read_mooncake,
)
from sglang_mx.capacity.workload import LengthDist, WorkloadSpec
from sglang_mx.measure.tracegen import Trace, TraceRequest

FORMATS = ("sglang-mx", "mooncake", "azure", "burstgpt", "ledger")
READERS = {
    "mooncake": read_mooncake,
    "azure": read_azure,
    "burstgpt": read_burstgpt,
    "ledger": read_ledger,
}


@dataclass(frozen=True)
class TraceOptions:
    time_scale: float = 1.0
    sample: float = 1.0
    max_requests: int | None = None
    length_scale: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.time_scale > 0:
            raise TraceFormatError(f"--trace-time-scale {self.time_scale} must be above 0")
        if not 0 < self.sample <= 1:
            raise TraceFormatError(f"--trace-sample {self.sample} must be in (0, 1]")
        if self.max_requests is not None and self.max_requests < 1:
            raise TraceFormatError(f"--max-requests {self.max_requests} must be at least 1")


def detect(path: Path) -> str:
    """The format of a trace file, from its first line."""
    try:
        first = next((x for x in path.read_text().splitlines() if x.strip()), "")
    except OSError as exc:
        raise TraceFormatError(f"cannot read trace {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TraceFormatError(f"{path}: not a text trace file") from None
    if first.lstrip().startswith("{"):
        try:
            d = json.loads(first)
        except json.JSONDecodeError:
            d = {}
        if "header" in d:
            return "sglang-mx"
        if "hash_ids" in d:
            return "mooncake"
        if "ledger_export" in d or "cached_tokens" in d:
            return "ledger"
    if "ContextTokens" in first and "GeneratedTokens" in first:
        return "azure"
    if "Request tokens" in first and "Response tokens" in first:
        return "burstgpt"
    raise TraceFormatError(
        f"{path}: cannot tell the trace format from its first line; name it with "
        f"--trace-format {'|'.join(FORMATS)}"
    )


def _sampled(rows: Rows, opts: TraceOptions) -> list:
    rng = random.Random(opts.seed)
    kept = [r for r in sorted(rows.rows, key=lambda r: r.arrival_s) if rng.random() < opts.sample]
    return kept[: opts.max_requests] if opts.max_requests else kept


def _primes(rows: list) -> list[tuple[str, int]]:
    """Ledger keys' shared streams, each primed at its largest recorded use."""
    longest: dict[str, int] = {}
    for r in rows:
        key, n = r.segments[0]
        if key.startswith("lk"):
            longest[key] = max(longest.get(key, 0), n)
    return sorted(longest.items())


def expected_cached(rows: list, prime: list[tuple[str, int]]) -> list[int]:
    """Per row (in arrival order), the prompt tokens an ideal prefix cache already holds: every
    earlier row and priming prefix in it (what the runner could reach is counted as it runs)."""
    cache, out = SegmentCache(prime), []
    for r in rows:
        out.append(cache.match(r.segments))
        cache.add(r.segments)
    return out


def load_trace(path: str | Path, fmt: str = "auto", opts: TraceOptions | None = None) -> Trace:
    path, opts = Path(path), opts or TraceOptions()
    if not path.is_file():
        raise TraceFormatError(f"no trace file at {path}")
    fmt = detect(path) if fmt in ("auto", "", None) else fmt
    if fmt not in FORMATS:
        raise TraceFormatError(f"unknown --trace-format {fmt!r}; use {'|'.join(FORMATS)}")
    if fmt == "sglang-mx":
        try:
            return Trace.load(path)
        except (ValueError, KeyError, TypeError) as exc:
            raise TraceFormatError(f"{path}: not a readable sglang-mx trace ({exc})") from None
    rows_all = READERS[fmt](path, opts.length_scale)
    rows = _sampled(rows_all, opts)
    if not rows:
        raise TraceFormatError(f"{path}: no requests left to replay ({fmt}, after sampling)")
    prime = _primes(rows) if fmt == "ledger" else []
    cached = expected_cached(rows, prime)
    requests = [
        TraceRequest(
            f"r{i}", i, 0, r.segments, r.output_len, c, arrival_s=r.arrival_s * opts.time_scale
        )
        for i, (r, c) in enumerate(zip(rows, cached, strict=True))
    ]
    prompt = sum(r.input_len for r in requests)
    span = requests[-1].arrival_s or 0.0
    spec = WorkloadSpec(
        name=f"trace:{fmt}:{path.name}",
        input_len=LengthDist("fixed", round(prompt / len(requests))),
        output_len=LengthDist("fixed", round(sum(r.output_len for r in requests) / len(requests))),
        hit_rate=min(sum(cached) / prompt, 0.999),
        prefix_groups=max(1, len(prime)),
        num_requests=len(requests),
        arrival="trace",
        rate=len(requests) / span if span > 0 else float(len(requests)),
        prime=bool(prime),
        seed=opts.seed,
    )
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    source = {
        "path": str(path),
        "format": fmt,
        "note": rows_all.note,
        "skipped": rows_all.skipped,
        "rows": len(rows_all.rows),
        "options": asdict(opts),
    }
    prefix = max((n for _, n in prime), default=0)
    return Trace(spec, prefix, prime, requests, created, source)


def fit_trace(path: str | Path, fmt: str, opts: TraceOptions, context_length: int) -> Trace:
    """load_trace, with lengths scaled by one factor until every request fits the context."""
    trace = load_trace(path, fmt, opts)
    if fits(trace, context_length):
        return trace
    n_in, n_out = longest_request(trace)
    factor = min((context_length - PROMPT_RESERVE - 1) / n_in, context_length / (n_in + n_out))
    for _ in range(50):
        scaled = load_trace(path, fmt, _with_scale(opts, opts.length_scale * factor))
        if fits(scaled, context_length):
            scaled.spec = scaled.spec.with_overrides(name=f"{scaled.spec.name}@ctx{context_length}")
            return scaled
        factor *= 0.97
    raise TraceFormatError(f"trace {path} cannot be scaled into a {context_length}-token context")


def _with_scale(opts: TraceOptions, factor: float) -> TraceOptions:
    return replace(opts, length_scale=factor)
