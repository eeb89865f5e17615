"""Shared machinery of the DSL agent programs: a metered RuntimeEndpoint (hit rate, per-call
latency and, through the provider, billed cost; a no-reuse mode that flushes the cache before
every call), the reuse-vs-no-reuse comparison, a run through the provider with an API key, and
conversion of the recorded calls into a replayable trace."""

from __future__ import annotations

import argparse
import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

FLUSH_RETRIES = 50
FLUSH_WAIT_S = 0.1


@dataclass
class Call:
    session: int
    prompt: str
    output: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    latency_s: float
    t: float
    id: str = ""  # the provider's ledger row id (SGLang's own rid when called directly)
    cost: float | None = None  # USD billed by the provider; None when SGLang is called directly


@dataclass
class Meter:
    calls: list[Call] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # each program instance's final text

    @property
    def cost(self) -> float | None:
        costs = [c.cost for c in self.calls]
        return None if not costs or None in costs else float(sum(costs))  # type: ignore[arg-type]

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def cached_tokens(self) -> int:
        return sum(c.cached_tokens for c in self.calls)

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def metered_endpoint(base_url: str, reuse: bool = True, api_key: str | None = None):
    """A RuntimeEndpoint that records every generation. Calls are serialized in both modes so
    that the only difference between them is the prefix cache; without reuse the cache is
    flushed before each call (SGLang flushes only when idle, which serializing guarantees).
    `api_key` is sent as `Authorization: Bearer` (the provider's keys)."""
    from sglang.lang.backend.runtime_endpoint import RuntimeEndpoint

    class MeteredEndpoint(RuntimeEndpoint):
        def __init__(self) -> None:
            # the DSL picks a chat template by model path; these programs use plain text
            super().__init__(base_url, api_key=api_key, chat_template_name="default")
            self.meter = Meter()
            self.lock = threading.Lock()
            self.t0 = time.perf_counter()

        def flush_cache(self) -> None:
            # SGLang refuses to flush until the scheduler is idle, a moment after the last reply
            for _ in range(FLUSH_RETRIES):
                try:
                    return super().flush_cache()
                except RuntimeError:
                    time.sleep(FLUSH_WAIT_S)
            super().flush_cache()

        def _record(self, s, text: str, meta: dict, start: float) -> None:
            usage = meta.get("usage")  # the provider's billed usage
            self.meter.calls.append(
                Call(
                    session=int(s.arguments.get("session", 0)) if s.arguments else 0,
                    prompt=s.text_,
                    output=text,
                    prompt_tokens=int(meta.get("prompt_tokens", 0)),
                    cached_tokens=int(meta.get("cached_tokens", 0)),
                    completion_tokens=int(meta.get("completion_tokens", 0)),
                    latency_s=time.perf_counter() - start,
                    t=start - self.t0,
                    id=str(meta.get("id", "")),
                    cost=float(usage["cost"]) if isinstance(usage, dict) else None,
                )
            )

        def generate(self, s, sampling_params):
            with self.lock:
                if not reuse:
                    self.flush_cache()
                start = time.perf_counter()
                text, meta = super().generate(s, sampling_params)
                self._record(s, text, meta, start)
            return text, meta

        def commit_lazy_operations(self, s):
            # a fork first prefills the shared prefix (max_new_tokens=0); record it as a call
            with self.lock:
                if not reuse:
                    self.flush_cache()
                start = time.perf_counter()
                data = {"text": s.text_, "sampling_params": {"max_new_tokens": 0}}
                obj = self._generate_http_request(s, data)
                self._record(s, "", obj.get("meta_info") or {}, start)

    return MeteredEndpoint()


def run_program(
    func,
    base_url: str,
    sessions: int,
    reuse: bool,
    api_key: str | None = None,
    flush: bool = True,
    **kwargs,
) -> tuple[Meter, float]:
    """Run `sessions` instances of a DSL program; returns the meter and the wall time. The
    cache is flushed first unless `flush` is False (the provider refuses /flush_cache)."""
    endpoint = metered_endpoint(base_url, reuse=reuse, api_key=api_key)
    if flush:
        endpoint.flush_cache()
    args = [{"session": i, **kwargs} for i in range(sessions)]
    start = time.perf_counter()
    states = func.run_batch(args, backend=endpoint, num_threads=sessions, progress_bar=False)
    wall = time.perf_counter() - start
    for st in states:
        if st.error():
            raise RuntimeError(f"agent program failed: {st.error()}")
        endpoint.meter.texts.append(st.text())
    return endpoint.meter, wall


def _run_summary(func, sessions: int, meter) -> dict:
    """What every program report opens with: which program, how many sessions, what it sent."""
    return {
        "program": func.func.__name__ if hasattr(func, "func") else str(func),
        "sessions": sessions,
        "calls": len(meter.calls),
        "prompt_tokens": meter.prompt_tokens,
        "cached_tokens": meter.cached_tokens,
    }


def run_via_provider(func, base_url: str, api_key: str, sessions: int = 1, **kwargs) -> dict:
    """Run a program through the provider with a key (prefix reuse on, no flush: the provider
    refuses it) and report what the customer sees: calls, cached-token ratio, billed cost."""
    meter, wall = run_program(func, base_url, sessions, True, api_key=api_key, flush=False,
                              **kwargs)  # fmt: skip
    cost = meter.cost
    return {
        **_run_summary(func, sessions, meter),
        "completion_tokens": sum(c.completion_tokens for c in meter.calls),
        "cached_ratio": meter.hit_rate,
        "cost_usd": cost,
        "cost_usd_per_run": None if cost is None else cost / sessions,
        "wall_s": wall,
        "meter": meter,
    }


def compare_reuse(func, base_url: str, sessions: int = 2, warmup: bool = True, **kwargs) -> dict:
    """The same calls with and without prefix reuse: hit rate, prefill tokens, speedup. A
    discarded warm-up run first keeps one-off costs (compilation, first batch) out of both."""
    if warmup:
        run_program(func, base_url, sessions, True, **kwargs)
    with_reuse, wall_reuse = run_program(func, base_url, sessions, True, **kwargs)
    without, wall_none = run_program(func, base_url, sessions, False, **kwargs)
    return {
        **_run_summary(func, sessions, with_reuse),
        "hit_rate": with_reuse.hit_rate,
        "no_reuse_hit_rate": without.hit_rate,
        "prefill_tokens_reuse": with_reuse.prompt_tokens - with_reuse.cached_tokens,
        "prefill_tokens_no_reuse": without.prompt_tokens - without.cached_tokens,
        "wall_s_reuse": wall_reuse,
        "wall_s_no_reuse": wall_none,
        "speedup": wall_none / wall_reuse if wall_reuse else float("nan"),
        "meter": with_reuse,
    }


def to_trace(meter: Meter, tokenize: Callable[[str], list[int]], name: str = "agent"):
    """Recorded calls -> a Trace: each prompt is the longest-shared-prefix earlier prompt's
    segments plus a new segment, so the replay keeps lengths, sharing and turn order."""
    from sglang_mx.capacity.workload import LengthDist, WorkloadSpec
    from sglang_mx.measure.tracegen import Trace, TraceRequest

    requests: list[TraceRequest] = []
    ids_seen: list[list[int]] = []
    last_in_session: dict[int, str] = {}
    for i, call in enumerate(sorted(meter.calls, key=lambda c: c.t)):
        ids = tokenize(call.prompt)
        best_j, best_n = -1, 0
        for j, prev in enumerate(ids_seen):
            n = 0
            for a, b in zip(ids, prev, strict=False):
                if a != b:
                    break
                n += 1
            if n > best_n:
                best_j, best_n = j, n
        best_n = min(best_n, len(ids) - 1)
        segs: list[tuple[str, int]] = []
        if best_j >= 0 and best_n:
            left = best_n
            for key, n in requests[best_j].segments:
                take = min(n, left)
                segs.append((key, take))
                left -= take
                if not left:
                    break
        segs.append((f"c{i}", len(ids) - best_n))
        rid = f"c{i}"
        requests.append(
            TraceRequest(
                rid,
                call.session,
                i,
                segs,
                max(1, call.completion_tokens),
                best_n,
                arrival_s=None,
                after=last_in_session.get(call.session),
            )
        )
        last_in_session[call.session] = rid
        ids_seen.append(ids)
    n_out = sum(r.output_len for r in requests) // max(1, len(requests))
    spec = WorkloadSpec(
        name=name,
        output_len=LengthDist("fixed", n_out),
        arrival="concurrency",
        concurrency=max(1, len(last_in_session)),
        num_requests=len(requests),
        prime=False,
        hit_rate=meter.hit_rate if meter.hit_rate < 1 else 0.0,
    )
    return Trace(spec, 0, [], requests, created=time.strftime("%Y-%m-%dT%H:%M:%S"))


def stdlib_document(module: str, max_chars: int) -> str:
    """Deterministic long context: source text of a standard-library module."""
    import importlib

    return inspect.getsource(importlib.import_module(module))[:max_chars]


def cli(func, description: str, default_sessions: int = 2, **defaults) -> Callable[..., int]:
    def main(argv: list[str] | None = None) -> int:
        p = argparse.ArgumentParser(description=description)
        p.add_argument("--url", required=True, help="SGLang server base URL")
        p.add_argument("--sessions", type=int, default=default_sessions)
        p.add_argument("--trace-out", help="also write the recorded calls as a JSONL trace")
        p.add_argument("--tokenizer", help="tokenizer dir for --trace-out (default: the model's)")
        args = p.parse_args(argv)
        res = compare_reuse(func, args.url.rstrip("/"), args.sessions, **defaults)
        meter = res.pop("meter")
        print(json.dumps(res, indent=1))
        if args.trace_out:
            from sglang_mx.bench.load.prompts import load_tokenizer

            tok_dir = args.tokenizer or metered_endpoint(args.url).model_info["model_path"]
            tok = load_tokenizer(tok_dir)
            trace = to_trace(
                meter, lambda t: tok.encode(t, add_special_tokens=False).ids, name=res["program"]
            )
            print(f"trace: {trace.save(args.trace_out)}")
        return 0

    return main
