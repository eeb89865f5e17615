"""A server's Prometheus `/metrics`, read under one vocabulary for SGLang and vLLM alike: token
counters (taken before and after a run, for the token audit) and load gauges (sampled during a
run: queue length, running requests, cache hit rate, KV token usage).

SGLang exports them with `--enable-metrics` (`sglang:` names); vLLM always (`vllm:` names). A
server without /metrics (or with neither family) reads as empty, never as an error."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from sglang_mx.bench.load.client_check import Background
from sglang_mx.measure.run_checks import ServerMetrics

# our name -> the metric names that mean it (summed over their label sets)
COUNTERS = {
    "prompt_tokens": ("sglang:prompt_tokens_total", "vllm:prompt_tokens_total"),
    "generation_tokens": ("sglang:generation_tokens_total", "vllm:generation_tokens_total"),
    "cached_tokens": ("sglang:cached_tokens_total", "vllm:prefix_cache_hits_total"),
    "requests": ("sglang:num_requests_total", "vllm:request_success_total"),
    # speculative decoding (acceptance.py): SGLang's verify steps; vLLM's drafts and the
    # draft tokens they accepted
    "spec_verify_calls": ("sglang:spec_verify_calls_total",),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
}
GAUGES = {
    "queue_reqs": ("sglang:num_queue_reqs", "vllm:num_requests_waiting"),
    "running_reqs": ("sglang:num_running_reqs", "vllm:num_requests_running"),
    "cache_hit_rate": ("sglang:cache_hit_rate", "vllm:gpu_prefix_cache_hit_rate"),
    "token_usage": ("sglang:token_usage", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
}


def parse(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {metric name: value summed over label sets}. Counters are
    read under their sample name (`..._total`), as both engines export them."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, rest = line.partition(" ")
        if "{" in line:  # labels may hold spaces: split at the closing brace
            name_part, _, rest = line.partition("}")
            name_part = name_part.split("{", 1)[0]
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        if not math.isnan(value):
            out[name_part] = out.get(name_part, 0.0) + value
    return out


def pick(raw: dict[str, float], table: dict[str, tuple[str, ...]]) -> dict[str, float]:
    """Our names for whatever of `table` the server exports (first matching name wins)."""
    out = {}
    for ours, names in table.items():
        for name in names:
            if name in raw:
                out[ours] = raw[name]
                break
    return out


def engine_of(raw: dict[str, float]) -> str:
    if any(k.startswith("sglang:") for k in raw):
        return "sglang"
    return "vllm" if any(k.startswith("vllm:") for k in raw) else ""


async def scrape(client, base_url: str) -> dict[str, float] | None:
    """The raw metrics of `base_url`, or None when it has no /metrics."""
    try:
        resp = await client.get(f"{base_url}/metrics")
    except Exception:
        return None
    if resp.status_code != 200:
        return None
    raw = parse(resp.text)
    return raw if engine_of(raw) else None


def counter_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict:
    """Our counters' increase between two scrapes ({} when either is missing)."""
    if before is None or after is None:
        return {}
    b, a = pick(before, COUNTERS), pick(after, COUNTERS)
    return {k: a[k] - b.get(k, 0.0) for k in a}


@dataclass
class GaugeSampler(Background):
    """Polls the load gauges every `interval_s` while a run goes; `summary()` gives mean and max
    of each (the server updates them once per scheduler step or log interval)."""

    client: object
    base_url: str
    interval_s: float = 0.5
    samples: list[dict[str, float]] = field(default_factory=list)
    engine: str = ""
    _task: asyncio.Task | None = None

    async def _loop(self) -> None:
        while True:
            raw = await scrape(self.client, self.base_url)
            if raw is None:
                return  # no /metrics: stop asking
            self.engine = engine_of(raw)
            self.samples.append({"t": time.perf_counter(), **pick(raw, GAUGES)})
            await asyncio.sleep(self.interval_s)

    def summary(self) -> ServerMetrics:
        gauges = {}
        for name in GAUGES:
            values = [s[name] for s in self.samples if name in s]
            if values:
                gauges[name] = {"mean": sum(values) / len(values), "max": max(values)}
        return ServerMetrics(self.engine, len(self.samples), gauges)
