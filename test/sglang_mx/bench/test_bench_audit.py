"""Token audit, load-generator self-check and server metrics against the fake server over real
HTTP: a clean run passes all three counts; a server counter that over-counts and a stream that
delivers fewer tokens than its usage claims are each caught, naming the count that is off; a
client whose event loop is blocked is flagged client-bound; the /metrics gauges reach the
summary."""

from __future__ import annotations

import asyncio
import time

from bench_fake_openai import FakeCache, make_app
from sglang_mx.bench.load.prompts import SegmentTokens, materialize
from sglang_mx.bench.load.promscrape import COUNTERS, parse, pick
from sglang_mx.bench.run.runner import RunConfig, run_trace, run_trace_async
from sglang_mx.capacity.workload import get_preset
from sglang_mx.measure.tracegen import generate
from sglang_mx_lab.testing.inprocess import serve_in_thread

SPEC = get_preset("cpu-2k-32-60").with_overrides(
    num_requests=8, arrival="concurrency", concurrency=4, input_len=None, output_len=None
)


def _run(tokenizer, **app):
    tokens = SegmentTokens(tokenizer)
    trace = generate(SPEC)
    with serve_in_thread(make_app(FakeCache(), metrics=True, **app)) as url:
        cfg = RunConfig(base_url=url, progress=False, warmup=0)
        return run_trace(trace, materialize(trace, tokens), cfg, tokens)


def test_clean_run_passes_three_way_audit(tiny_tokenizer):
    res = _run(tiny_tokenizer)
    a = res.summary.audit
    assert a.ok, a
    checks = {c["check"]: c for c in a.checks}
    assert set(checks) == {
        "prompt tokens: client vs usage",
        "output tokens: client re-encoded vs usage",
        "prompt_tokens: usage vs server counter",
        "generation_tokens: usage vs server counter",
        "cached_tokens: usage vs server counter",
        "ignore_eos: every request got max_tokens",
    }
    assert checks["generation_tokens: usage vs server counter"]["server"] == 8 * 32
    assert a.server_counters["requests"] == 8  # priming requests counted before the run
    m = res.summary.server_metrics
    assert m.engine == "sglang" and m.gauges["token_usage"]["mean"] == 0.25


def test_planted_counter_mismatch_fails_the_audit(tiny_tokenizer):
    res = _run(tiny_tokenizer, count_extra_generation=2)  # 34 counted per 32-token request
    a = res.summary.audit
    assert not a.ok
    assert a.failed == ("generation_tokens: usage vs server counter",)
    assert "usage 256 vs server 272" in a.message
    assert any("TOKEN AUDIT FAILED" in w for w in res.warnings)


def test_planted_short_stream_fails_the_client_count(tiny_tokenizer):
    res = _run(tiny_tokenizer, short_by=8)  # 24 tokens streamed, usage says 32
    a = res.summary.audit
    assert a.failed == ("output tokens: client re-encoded vs usage",), a
    assert "client 192 vs usage 256" in a.message


def test_prometheus_text_is_read_under_both_engines_names():
    text = (
        '# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{model_name="m"} 10\n'
        'vllm:prompt_tokens_total{model_name="n"} 5\nvllm:generation_tokens_total 7\n'
        'vllm:num_requests_waiting{a="x y"} 3\n'
    )
    raw = parse(text)
    assert pick(raw, COUNTERS) == {"prompt_tokens": 15.0, "generation_tokens": 7.0}
    assert raw["vllm:num_requests_waiting"] == 3.0


def test_blocked_event_loop_is_flagged_client_bound(tiny_tokenizer):
    tokens = SegmentTokens(tiny_tokenizer)
    spec = SPEC.with_overrides(arrival="poisson", rate=100.0, num_requests=16)
    trace = generate(spec)
    prompts = materialize(trace, tokens)

    async def hogged(url: str):
        async def hog():  # a client busy elsewhere: holds its loop 40 ms at a time
            while True:
                time.sleep(0.04)
                await asyncio.sleep(0.001)

        task = asyncio.create_task(hog())
        try:
            cfg = RunConfig(base_url=url, progress=False, warmup=0)
            return await run_trace_async(trace, prompts, cfg, tokens)
        finally:
            task.cancel()

    with serve_in_thread(make_app(FakeCache(), metrics=True)) as url:
        res = asyncio.run(hogged(url))
    c = res.summary.selfcheck
    assert c.client_bound, c
    assert c.schedule_lag_s.p99 > 0.010 and c.schedule_lag_s.n == 16
    assert any("schedule lag p99" in r for r in c.reasons)
    assert any("CLIENT-BOUND" in w for w in res.warnings)
