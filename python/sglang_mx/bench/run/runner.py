"""Async load runner for any OpenAI-compatible endpoint (SGLang, vLLM, ours): replays a trace
with streaming requests and records TTFT, inter-token latencies, E2E, token and cached-token
counts and errors per request. Flushes and primes the prefix cache, and warns loudly when the
cache turns out warmer (or colder) than the trace was designed for. Reads the server's context
length and vocabulary first and refuses a trace that cannot fit (limits.py); a request that fails
mid-run (HTTP error, in-stream error, dropped connection) is counted, never raised. The requests
go out from this process or from `RunConfig.processes` worker processes on one clock
(loadgen.py); flushing, priming and the server's counters stay here."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field

from sglang_mx.bench.load import promscrape
from sglang_mx.bench.load.client_check import selfcheck
from sglang_mx.bench.load.limits import BenchError, ServerLimits, check_fits, read_limits
from sglang_mx.bench.load.loadgen import Job, Progress, drive, http_client, spread
from sglang_mx.bench.load.reach import by_first_token, by_send_time, outside_bounds
from sglang_mx.bench.load.stream import cached_tokens, endpoint_path, request_body, send_one
from sglang_mx.bench.run import acceptance
from sglang_mx.bench.run.audit import TOLERANCE, audit, count_client_output
from sglang_mx.measure.metrics import RequestResult, Slo, summarize
from sglang_mx.measure.summary import RunSummary
from sglang_mx.measure.tracegen import Trace, TraceRequest

# Measured vs designed cached tokens may differ by chance matches of a few tokens per request.
WARM_TOLERANCE_TOKENS = 4
WARM_TOLERANCE_FRACTION = 0.01


@dataclass
class RunConfig:
    base_url: str
    model: str | None = None  # default: the first id of /v1/models
    api: str = "completions"  # completions (token ids or text) | chat (text)
    send_ids: bool = True  # send token ids (exact) instead of decoded text
    flush: bool = True
    prime: bool = True
    ignore_eos: bool = True  # SGLang/vLLM extension: always generate output_len tokens
    page_size: int = 1  # the server caches whole pages; expected hits round down to this
    warmup: int = 2  # short unmeasured requests first, so one-off compile stalls stay out
    timeout_s: float = 600.0
    progress: bool = True
    api_key: str | None = None
    extra_body: dict = field(default_factory=dict)
    check_limits: bool = True  # refuse a trace the server's context or vocabulary cannot take
    limits: ServerLimits | None = None  # None: read from the server before the run
    scrape_metrics: bool = True  # /metrics before, during and after the run (promscrape.py)
    gauge_interval_s: float = 0.5
    audit_tolerance: float = TOLERANCE
    calibration: dict | None = None  # the client's ceiling (calibrate.py), for the self-check
    processes: int = 1  # load worker processes (loadgen.py); 1 sends from this process


@dataclass
class RunResult:
    results: list[RequestResult]
    summary: RunSummary
    warnings: list[str]
    meta: dict

    def to_dict(self) -> dict:
        return {
            "summary": self.summary.to_dict(),
            "warnings": self.warnings,
            "meta": self.meta,
            "requests": [r.to_dict() for r in self.results],
        }


def loud(message: str) -> str:
    bar = "!" * 78
    sys.stderr.write(f"\n{bar}\n!! {message}\n{bar}\n")
    return message


async def first_model(client, base_url: str) -> str:
    try:
        resp = await client.get(f"{base_url}/v1/models")
        resp.raise_for_status()
        return resp.json()["data"][0]["id"]
    except Exception as exc:
        raise BenchError(
            f"cannot read a model name from {base_url}/v1/models ({type(exc).__name__}: "
            f"{str(exc)[:200]}); pass --model"
        ) from None


async def flush_cache(client, base_url: str, retries: int = 50, wait_s: float = 0.1) -> bool:
    """SGLang's /flush_cache (POST, older servers GET); False if the server has none. SGLang
    refuses while requests are still finishing, so a refusal is retried for a few seconds."""
    for method in ("POST", "GET"):
        for _ in range(retries):
            try:
                resp = await client.request(method, f"{base_url}/flush_cache")
            except Exception:
                return False
            if resp.status_code < 300:
                return True
            if resp.status_code in (404, 405):
                break
            await asyncio.sleep(wait_s)
        else:
            return False
    return False


async def _warmup(client, cfg: RunConfig, model: str, tokens, trace: Trace) -> None:
    """Concurrent short requests with their own tokens (the flush that follows drops them)."""
    ids = tokens.segment("__warmup__", 64) if tokens else [1] * 64
    text = tokens.text(ids) if tokens else ""
    n_out = min(8, max(r.output_len for r in trace.requests))
    await asyncio.gather(
        *(
            send_one(client, cfg, model, ids[i:], text, f"warmup{i}", n_out, time.perf_counter())
            for i in range(cfg.warmup)
        )
    )


async def _prime(
    client, cfg: RunConfig, model: str, prompts: dict, tokens, trace: Trace
) -> tuple[int, list[str], list[tuple[str, int]]]:
    """Send each shared prefix once (1 output token); returns the cached tokens they already
    had, one error message per priming request that failed (the run goes on without it) and the
    prefixes that went in."""
    warm, errors, primed = 0, [], []
    for key, n in trace.prime:
        ids = prompts[f"prime:{key}"]
        body = request_body(cfg, model, ids, 1, False, tokens.text(ids) if tokens else "")
        try:
            resp = await client.post(cfg.base_url + endpoint_path(cfg), json=body)
        except Exception as exc:
            errors.append(f"priming {key}: {type(exc).__name__}: {exc}")
            continue
        if resp.status_code >= 400:
            errors.append(f"priming {key}: HTTP {resp.status_code}: {resp.text[:300]}")
            continue
        warm += cached_tokens(resp.json().get("usage") or {})
        primed.append((key, n))
    return warm, errors, primed


def _max_sent_id(cfg: RunConfig, prompts: dict[str, list[int]]) -> int | None:
    """Largest token id the run sends as ids (None when it sends text)."""
    if not cfg.send_ids or cfg.api == "chat":
        return None
    return max((max(ids) for ids in prompts.values() if ids), default=None)


async def run_trace_async(
    trace: Trace, prompts: dict[str, list[int]], cfg: RunConfig, tokens=None, slo: Slo | None = None
) -> RunResult:
    if cfg.processes < 1:
        raise BenchError(f"processes {cfg.processes}: at least 1")
    warnings: list[str] = []
    async with http_client(cfg) as client:
        model = cfg.model or await first_model(client, cfg.base_url)
        limits = cfg.limits or await read_limits(client, cfg.base_url, model)
        if cfg.check_limits:
            check_fits(trace, limits, _max_sent_id(cfg, prompts))
        if cfg.warmup:
            await _warmup(client, cfg, model, tokens, trace)
        flushed = await flush_cache(client, cfg.base_url) if cfg.flush else False
        if cfg.flush and not flushed:
            warnings.append(
                loud("could not flush the prefix cache: hits may come from earlier runs")
            )
        prime_warm, prime_errors, primed = (
            await _prime(client, cfg, model, prompts, tokens, trace) if cfg.prime else (0, [], [])
        )
        if prime_errors:
            warnings.append(
                loud(
                    f"{len(prime_errors)} of {len(trace.prime)} priming requests failed, "
                    f"first: {prime_errors[0]}"
                )
            )
        if flushed and prime_warm > WARM_TOLERANCE_TOKENS * len(trace.prime):
            warnings.append(loud(f"CACHE WAS WARM after flushing: priming hit {prime_warm} tokens"))

        progress = Progress(len(trace.requests), cfg.progress and cfg.processes == 1)
        concurrency = trace.spec.concurrency if trace.spec.arrival == "concurrency" else None
        before = await _quiet_metrics(client, cfg.base_url) if cfg.scrape_metrics else None
        sampler = promscrape.GaugeSampler(client, cfg.base_url, cfg.gauge_interval_s)
        if before is not None:
            sampler.start()
        jobs = [_job(r, prompts, tokens, cfg) for r in trace.requests]
        if cfg.processes == 1:
            t0 = time.perf_counter()
            driven = [await drive(client, cfg, model, jobs, t0, concurrency, progress)]
        else:
            t0, driven = await asyncio.to_thread(
                spread, cfg, model, jobs, concurrency, cfg.processes
            )
        by_id = {res.request_id: res for d in driven for res in d.results}
        results = [by_id[r.id] for r in trace.requests]
        _reach(trace, results, primed, cfg.page_size)
        await sampler.stop()
        after = await _settled_metrics(client, cfg.base_url, before, len(results))
    summary = summarize(results, slo)
    if tokens is not None:
        count_client_output(results, tokens.tokenizer)
    if tokens is not None and not cfg.send_ids and cfg.api == "completions":
        for r in results:  # text prompts: the client's count is its own encoding of the text
            text = tokens.text(prompts[r.request_id])
            encoded = tokens.tokenizer.encode(text, add_special_tokens=False)
            r.client_prompt_tokens = len(encoded.ids)
    delta = promscrape.counter_delta(before, after)
    summary = dataclasses.replace(
        summary,
        cache_bounds=outside_bounds(results, WARM_TOLERANCE_TOKENS),
        audit=audit(results, delta, cfg.ignore_eos, cfg.audit_tolerance),
        speculative=acceptance.measured(delta),
        selfcheck=selfcheck(
            results,
            [late for d in driven for late in d.loop_late],
            [d.cpu_s for d in driven],
            max(d.wall_s for d in driven),
            (summary.request_throughput, summary.output_tok_s),
            cfg.calibration,
        ),
        server_metrics=sampler.summary(),
    )
    if not summary.audit.ok:
        warnings.append(loud(f"TOKEN AUDIT FAILED: {summary.audit.message}"))
    if summary.selfcheck.client_bound:
        reasons = "; ".join(summary.selfcheck.reasons)
        warnings.append(loud(f"CLIENT-BOUND: the load generator could not keep up ({reasons})"))
    if summary.errors:
        warnings.append(
            loud(
                f"{summary.errors} of {summary.requests} requests failed, first: "
                f"{summary.first_error[:300]}"
            )
        )
    warnings += cache_warnings(summary)
    meta = {
        "model": model,
        "base_url": cfg.base_url,
        "api": cfg.api,
        "flushed": flushed,
        "primed": bool(cfg.prime and trace.prime),
        "prime_errors": prime_errors,
        "limits": limits.to_dict(),
        "send_ids": cfg.send_ids,
        "trace": trace.header(),
        # per request, in trace order: its cached tokens measured beside the designed and the
        # reachable (reach.py), TTFT, E2E, tokens, error
        "requests": [r.row() for r in results],
    }
    return RunResult(results, summary, warnings, meta)


def _job(r: TraceRequest, prompts: dict, tokens, cfg: RunConfig) -> Job:
    ids = prompts[r.id]
    text = tokens.text(ids) if (tokens and not (cfg.send_ids and cfg.api != "chat")) else ""
    return Job(r.id, ids, text, r.output_len, r.arrival_s, r.after)


def _reach(trace: Trace, results: list, primed: list, page: int) -> None:
    """Each result's designed, reachable (held when it was sent) and possible (held by its first
    token) cached tokens, in whole pages, from the run's one clock."""
    sent = {r.request_id: r.start for r in results if not math.isnan(r.lag)}
    first = {r.request_id: r.start + r.ttft for r in results if not math.isnan(r.ttft)}
    held = by_send_time(trace.requests, sent, first, primed)
    ceiling = by_first_token(trace.requests, first, primed)
    for req, r in zip(trace.requests, results, strict=True):
        r.expected_cached = (req.expected_cached // page) * page
        r.reachable_cached = min((held[r.request_id] // page) * page, r.expected_cached)
        r.possible_cached = (ceiling[r.request_id] // page) * page


async def _quiet_metrics(client, base_url: str, wait_s: float = 2.0):
    """The metrics once the warm-up and priming requests are counted: two scrapes 50 ms apart
    with the same request count (or whatever is there after `wait_s`)."""
    deadline = time.perf_counter() + wait_s
    last = await promscrape.scrape(client, base_url)
    while last is not None and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
        now = await promscrape.scrape(client, base_url)
        if promscrape.counter_delta(last, now).get("requests", 0) == 0:
            return now
        last = now
    return last


async def _settled_metrics(client, base_url: str, before, n_requests: int, wait_s: float = 3.0):
    """The metrics once the server has counted the run's requests: SGLang bumps its counters
    as the tokenizer manager finishes a request, which may trail the last streamed chunk."""
    if before is None:
        return None
    deadline = time.perf_counter() + wait_s
    while True:
        after = await promscrape.scrape(client, base_url)
        delta = promscrape.counter_delta(before, after)
        if delta.get("requests", n_requests) >= n_requests or time.perf_counter() > deadline:
            return after
        await asyncio.sleep(0.05)


def cache_warnings(summary: RunSummary) -> list[str]:
    """Loud messages when measured cached tokens stray from the trace's design: above it (a warm
    cache), below what the server could reach (eviction, pages, caching off), or the design
    itself out of reach because arrivals overlapped their prefix's first prefill."""
    out = []
    ok = summary.completed
    if not ok:
        return out
    measured, expected = summary.cached_tokens, summary.expected_cached_tokens
    reachable, possible = summary.reachable_cached_tokens, summary.possible_cached_tokens
    reachable = expected if reachable is None else reachable
    ceiling = max(expected, expected if possible is None else possible)
    tol = max(WARM_TOLERANCE_TOKENS * ok, WARM_TOLERANCE_FRACTION * summary.input_tokens)
    if measured == 0 and reachable > 0:
        out.append(
            loud(
                "the endpoint reported no cached tokens: is prefix caching on and "
                "reported? (SGLang: --enable-cache-report)"
            )
        )
    elif measured > ceiling + tol:
        out.append(
            loud(
                f"CACHE WAS WARM: {measured} cached tokens vs {ceiling} designed; "
                "results overstate a cold run (flush the cache or restart the server)"
            )
        )
    elif measured < reachable - tol:
        out.append(
            loud(
                f"fewer cache hits than designed: {measured} vs {reachable} tokens the server "
                "already held when each request was sent (eviction, page rounding or prefix "
                "caching off)"
            )
        )
    bounds = summary.cache_bounds
    if bounds is not None and (bounds.below_reachable or bounds.above_possible):
        out.append(
            loud(
                f"cached tokens out of bounds in {bounds.below_reachable} request(s) below "
                f"what the server held when they were sent and {bounds.above_possible} above "
                f"what they could find, first {bounds.first}"
            )
        )
    if reachable < expected - tol:
        out.append(
            loud(
                f"ARRIVALS OVERLAPPED: {expected - reachable} of the {expected} designed cached "
                "tokens were out of reach, their requests sent before the request that first "
                f"carried the prefix had its first token (measured {measured}); replay slower "
                "(--trace-time-scale) or at lower load for the whole design"
            )
        )
    return out


def run_trace(
    trace: Trace, prompts: dict[str, list[int]], cfg: RunConfig, tokens=None, slo: Slo | None = None
) -> RunResult:
    return asyncio.run(run_trace_async(trace, prompts, cfg, tokens, slo))
