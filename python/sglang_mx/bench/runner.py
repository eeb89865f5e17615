"""Async load runner for any OpenAI-compatible endpoint (SGLang, vLLM, ours): replays a trace
with streaming requests and records TTFT, inter-token latencies, E2E, token and cached-token
counts and errors per request. Flushes and primes the prefix cache, and warns loudly when the
cache turns out warmer (or colder) than the trace was designed for. Reads the server's context
length and vocabulary first and refuses a trace that cannot fit (limits.py); a request that fails
mid-run (HTTP error, in-stream error, dropped connection) is counted, never raised."""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_mx.bench import acceptance, promscrape
from sglang_mx.bench.audit import TOLERANCE, audit, count_client_output
from sglang_mx.bench.client_check import CpuClock, LoopProbe, selfcheck
from sglang_mx.bench.limits import BenchError, ServerLimits, check_fits, read_limits
from sglang_mx.bench.metrics import RequestResult, Slo, summarize
from sglang_mx.bench.reach import SegmentCache, by_first_token, outside_bounds
from sglang_mx.bench.tracegen import Trace, TraceRequest

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


@dataclass
class RunResult:
    results: list[RequestResult]
    summary: dict
    warnings: list[str]
    meta: dict

    def to_dict(self) -> dict:
        return {
            "summary": self.summary,
            "warnings": self.warnings,
            "meta": self.meta,
            "requests": [r.to_dict() for r in self.results],
        }


def loud(message: str) -> str:
    bar = "!" * 78
    sys.stderr.write(f"\n{bar}\n!! {message}\n{bar}\n")
    return message


class _Progress:
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


async def _first_model(client, base_url: str) -> str:
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


def _body(cfg: RunConfig, model: str, prompt, max_tokens: int, stream: bool, text: str) -> dict:
    body: dict = {"model": model, "max_tokens": max_tokens, "temperature": 0.0, "stream": stream}
    if cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = prompt if cfg.send_ids else text
    if stream:
        body["stream_options"] = {"include_usage": True}
    if cfg.ignore_eos:
        body["ignore_eos"] = True
    body.update(cfg.extra_body)
    return body


def _path(cfg: RunConfig) -> str:
    return "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"


def _cached(usage: dict) -> int:
    details = usage.get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)


def _delta_text(chunk: dict) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    return c.get("text") or (c.get("delta") or {}).get("content") or ""


async def send_one(
    client,
    cfg: RunConfig,
    model: str,
    ids: list[int],
    text: str,
    req_id: str,
    max_tokens: int,
    t0: float,
    intended: float | None = None,
    on_first: Callable[[], None] | None = None,
) -> RequestResult:
    """One streaming request; timings relative to t0 (the run's start); `intended` is when it
    was due (perf_counter), for the schedule lag; `on_first` is called as its first token
    arrives."""
    res = RequestResult(request_id=req_id, requested_output=max_tokens)
    if cfg.send_ids and cfg.api != "chat":
        res.client_prompt_tokens = len(ids)
    body = _body(cfg, model, ids, max_tokens, True, text)
    sent = time.perf_counter()
    res.start = sent - t0
    if intended is not None:
        res.lag = sent - intended
    last = None
    usage: dict = {}
    pieces: list[str] = []
    try:
        async with client.stream("POST", cfg.base_url + _path(cfg), json=body) as resp:
            if resp.status_code >= 400:
                detail = (await resp.aread()).decode(errors="replace")[:300]
                res.error = f"HTTP {resp.status_code}: {detail}"
                return res
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank lines and SSE comments (keep-alives)
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    res.error = f"in-stream error: {chunk['error']}"
                    return res
                now = time.perf_counter()
                if piece := _delta_text(chunk):
                    pieces.append(piece)
                    if last is None:
                        res.ttft = now - sent
                        if on_first is not None:
                            on_first()
                    else:
                        res.itl.append(now - last)
                    last = now
                if chunk.get("usage"):
                    usage = chunk["usage"]
    except Exception as exc:  # a network failure is a failed request, not a crashed run
        res.error = f"{type(exc).__name__}: {exc}"
        return res
    res.e2e = time.perf_counter() - sent
    res.output_text = "".join(pieces)
    res.usage_reported = bool(usage)
    res.prompt_tokens = int(usage.get("prompt_tokens") or len(ids))
    res.completion_tokens = int(usage.get("completion_tokens") or (len(res.itl) + 1))
    res.cached_tokens = _cached(usage)
    if math.isnan(res.ttft):
        res.error = "no tokens streamed"
    return res


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
        body = _body(cfg, model, ids, 1, False, tokens.text(ids) if tokens else "")
        try:
            resp = await client.post(cfg.base_url + _path(cfg), json=body)
        except Exception as exc:
            errors.append(f"priming {key}: {type(exc).__name__}: {exc}")
            continue
        if resp.status_code >= 400:
            errors.append(f"priming {key}: HTTP {resp.status_code}: {resp.text[:300]}")
            continue
        warm += _cached(resp.json().get("usage") or {})
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
    import httpx

    warnings: list[str] = []
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    timeout = httpx.Timeout(cfg.timeout_s, connect=30.0)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers) as client:
        model = cfg.model or await _first_model(client, cfg.base_url)
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

        done = {r.id: asyncio.Event() for r in trace.requests}
        progress = _Progress(len(trace.requests), cfg.progress)
        gate = (
            asyncio.Semaphore(trace.spec.concurrency)
            if trace.spec.arrival == "concurrency"
            else None
        )
        before = await _quiet_metrics(client, cfg.base_url) if cfg.scrape_metrics else None
        sampler = promscrape.GaugeSampler(client, cfg.base_url, cfg.gauge_interval_s)
        probe, clock = LoopProbe(), CpuClock()
        # what the server's cache provably holds as each request goes out (reach.py)
        held = SegmentCache(primed)
        if before is not None:
            sampler.start()
        probe.start()
        clock.start()
        t0 = time.perf_counter()

        async def one(r: TraceRequest) -> RequestResult:
            due = t0 + (r.arrival_s or 0.0)
            if r.arrival_s is not None:
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if r.after:
                await done[r.after].wait()
                due = max(due, time.perf_counter())  # free to go once its previous turn ended
            ids = prompts[r.id]
            text = tokens.text(ids) if (tokens and not (cfg.send_ids and cfg.api != "chat")) else ""
            n_out = r.output_len
            reachable = 0

            def send():  # held.match and the send with no await between them
                nonlocal reachable
                reachable = held.match(r.segments)
                return send_one(
                    client, cfg, model, ids, text, r.id, n_out, t0, due,
                    lambda: held.add(r.segments),
                )  # fmt: skip

            try:
                if gate is None:
                    res = await send()
                else:
                    async with gate:
                        due = max(due, time.perf_counter())  # a closed loop: when a slot freed
                        res = await send()
            finally:
                done[r.id].set()
            res.expected_cached = (r.expected_cached // cfg.page_size) * cfg.page_size
            page_reach = (reachable // cfg.page_size) * cfg.page_size
            res.reachable_cached = min(page_reach, res.expected_cached)
            progress.tick(res.ok)
            return res

        results = list(await asyncio.gather(*(one(r) for r in trace.requests)))
        _possible_cached(trace, results, primed, cfg.page_size)
        cpu_s, wall_s = clock.read()
        await probe.stop()
        await sampler.stop()
        after = await _settled_metrics(client, cfg.base_url, before, len(results))
    summary = summarize(results, slo)
    summary["cache_bounds"] = outside_bounds(results, WARM_TOLERANCE_TOKENS)
    if tokens is not None:
        count_client_output(results, tokens.tokenizer)
    if tokens is not None and not cfg.send_ids and cfg.api == "completions":
        for r in results:  # text prompts: the client's count is its own encoding of the text
            text = tokens.text(prompts[r.request_id])
            encoded = tokens.tokenizer.encode(text, add_special_tokens=False)
            r.client_prompt_tokens = len(encoded.ids)
    delta = promscrape.counter_delta(before, after)
    summary["audit"] = audit(results, delta, cfg.ignore_eos, cfg.audit_tolerance)
    summary["audit"]["server_counters"] = delta
    summary["speculative"] = acceptance.measured(delta)
    summary["selfcheck"] = selfcheck(results, probe.late, cpu_s, wall_s, summary, cfg.calibration)
    summary["server_metrics"] = sampler.summary()
    if not summary["audit"]["ok"]:
        warnings.append(loud(f"TOKEN AUDIT FAILED: {summary['audit']['message']}"))
    if summary["selfcheck"]["client_bound"]:
        reasons = "; ".join(summary["selfcheck"]["reasons"])
        warnings.append(loud(f"CLIENT-BOUND: the load generator could not keep up ({reasons})"))
    if summary["errors"]:
        warnings.append(
            loud(
                f"{summary['errors']} of {summary['requests']} requests failed, first: "
                f"{summary['first_error'][:300]}"
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
    }
    return RunResult(results, summary, warnings, meta)


def _possible_cached(trace: Trace, results: list, primed: list, page: int) -> None:
    """Each result's ceiling of cached tokens, from the order its first tokens came in."""
    first = {r.request_id: r.start + r.ttft for r in results if not math.isnan(r.ttft)}
    ceiling = by_first_token(trace.requests, first, primed)
    for r in results:
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


def cache_warnings(summary: dict) -> list[str]:
    """Loud messages when measured cached tokens stray from the trace's design: above it (a warm
    cache), below what the server could reach (eviction, pages, caching off), or the design
    itself out of reach because arrivals overlapped their prefix's first prefill."""
    out = []
    ok = summary["completed"]
    if not ok:
        return out
    measured, expected = summary["cached_tokens"], summary["expected_cached_tokens"]
    reachable = summary.get("reachable_cached_tokens", expected)
    ceiling = max(expected, summary.get("possible_cached_tokens", expected))
    tol = max(WARM_TOLERANCE_TOKENS * ok, WARM_TOLERANCE_FRACTION * summary["input_tokens"])
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
    bounds = summary.get("cache_bounds") or {}
    if bounds.get("below_reachable") or bounds.get("above_possible"):
        out.append(
            loud(
                f"cached tokens out of bounds in {bounds['below_reachable']} request(s) below "
                f"what the server held when they were sent and {bounds['above_possible']} above "
                f"what they could find, first {bounds['first']}"
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
