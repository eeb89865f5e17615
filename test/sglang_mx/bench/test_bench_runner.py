"""Runner, sweep, report and compare against an in-process fake OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from bench_fake_openai import FakeCache, make_app
from sglang_mx.bench.load.prompts import SegmentTokens, materialize
from sglang_mx.bench.report.html_page import write_report
from sglang_mx.bench.report.result import BenchResult
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.capacity.workload import get_preset
from sglang_mx.measure.compare import compare, markdown_table
from sglang_mx.measure.metrics import Slo
from sglang_mx.measure.stamp import stamp
from sglang_mx.measure.sweep import run_sweep
from sglang_mx.measure.tracegen import generate
from sglang_mx_lab.testing.inprocess import serve_in_thread

SPEC = get_preset("cpu-2k-32-60").with_overrides(num_requests=12, rate=50.0, output_len=None)


def _run(url, spec, tokens, **cfg):
    trace = generate(spec)
    return run_trace(
        trace, materialize(trace, tokens), RunConfig(base_url=url, progress=False, **cfg), tokens
    )


@pytest.mark.parametrize("turns", [1, 3])
def test_measured_hit_rate_matches_design(tiny_tokenizer, turns):
    tokens = SegmentTokens(tiny_tokenizer)
    cache = FakeCache()
    with serve_in_thread(make_app(cache)) as url:
        res = _run(url, SPEC.with_overrides(turns=turns), tokens)
    s = res.summary
    assert cache.flushes == 1
    assert s.completed == 12 and s.errors == 0
    assert s.output_tokens == 12 * 32
    assert abs(s.hit_rate - 0.6) < 0.01
    assert s.ttft_s.p50 > 0 and len(res.results[0].itl) == 31
    # The load generator's own timing check (schedule lag p99 <= 10 ms) depends on what else
    # the box runs (18 ms in a full suite beside server tests): a speed, not this behaviour.
    assert [w for w in res.warnings if not w.startswith("CLIENT-BOUND")] == []


def test_warm_cache_is_reported_loudly(tiny_tokenizer, capsys):
    tokens = SegmentTokens(tiny_tokenizer)
    spec = SPEC.with_overrides(prime=False, hit_rate=0.0)
    trace = generate(spec)
    prompts = materialize(trace, tokens)
    # a cache that already holds every prompt and cannot be flushed
    cache = FakeCache(warm=list(prompts.values()))
    app = make_app(cache)
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", "") != "/flush_cache"]
    with serve_in_thread(app) as url:
        res = run_trace(trace, prompts, RunConfig(base_url=url, progress=False), tokens)
    assert any("could not flush" in w for w in res.warnings)
    assert any("CACHE WAS WARM" in w for w in res.warnings)
    assert "CACHE WAS WARM" in capsys.readouterr().err


def test_errors_and_missing_cache_report_are_counted(tiny_tokenizer):
    tokens = SegmentTokens(tiny_tokenizer)
    with serve_in_thread(make_app(FakeCache(), report_cache=False, fail_every=4)) as url:
        res = _run(
            url, SPEC.with_overrides(arrival="concurrency", concurrency=3, prime=False), tokens
        )
    s = res.summary
    assert s.errors == 3 and s.completed == 9
    assert "HTTP 503" in next(r.error for r in res.results if not r.ok)
    assert any("no cached tokens" in w for w in res.warnings)


def test_sweep_report_and_compare(tiny_tokenizer, tmp_path):
    tokens = SegmentTokens(tiny_tokenizer)
    with serve_in_thread(make_app(FakeCache())) as url:

        def point(trace):
            cfg = RunConfig(base_url=url, progress=False)
            return run_trace(trace, materialize(trace, tokens), cfg, tokens).summary

        sweep = run_sweep(SPEC, "concurrency", [1, 4], point, Slo(ttft_p95_s=5.0))
    assert [p.x for p in sweep.points] == [1, 4]
    assert sweep.knee.x == 4  # both points meet a 5 s TTFT on the fake server
    result = BenchResult(
        stamp=stamp(config={"server": "fake"}), workload=SPEC.to_dict(), sweep=sweep, gpus=2
    )
    paths = write_report(result, tmp_path)
    for name in ("throughput_vs_load", "ttft_vs_load", "throughput_per_gpu_vs_per_user"):
        assert paths[name].read_bytes()[:4] == b"\x89PNG"
    md = paths["markdown"].read_text()
    assert "Knee" in md and result.stamp["date"] in md and "sglang" in md
    loaded = json.loads(paths["json"].read_text())
    assert loaded["sweep"]["points"][1]["summary"]["completed"] == 12
    assert BenchResult.from_dict(loaded).to_dict() == loaded  # the one way back

    a, b = (p.summary.to_dict() for p in sweep.points)
    rows = {r["figure"]: r for r in compare(a, b)}
    assert rows["output_tok_s"]["ratio"] == pytest.approx(b["output_tok_s"] / a["output_tok_s"])
    assert rows["ttft_s.p95"]["a"] == a["ttft_s"]["p95"]
    assert "| output_tok_s |" in markdown_table(list(rows.values()), "c1", "c4")


def test_text_prompts_are_counted_by_the_clients_own_encoding(tiny_tokenizer):
    # send_ids=False (a router that takes only text): the client's prompt count is its own
    # encoding of the text it sent, per request
    tokens = SegmentTokens(tiny_tokenizer)
    spec = SPEC.with_overrides(num_requests=3, prime=False, hit_rate=0.0)
    trace = generate(spec)
    prompts = materialize(trace, tokens)
    with serve_in_thread(make_app(FakeCache())) as url:
        res = run_trace(trace, prompts, RunConfig(base_url=url, progress=False, send_ids=False),
                        tokens)  # fmt: skip
    for r in res.results:
        text = tokens.text(prompts[r.request_id])
        want = len(tiny_tokenizer.encode(text, add_special_tokens=False).ids)
        assert r.client_prompt_tokens == want


def test_an_endpoint_refusing_token_ids_is_named_with_the_flag_that_sends_text(tiny_tokenizer):
    # sglang-router 0.3.2 (PD mode, 2026-12-05) refuses a prompt of token ids with a 422; the
    # failure names --send-text, and with it the same run succeeds
    tokens = SegmentTokens(tiny_tokenizer)
    spec = SPEC.with_overrides(num_requests=3, prime=False, hit_rate=0.0)
    with serve_in_thread(make_app(FakeCache(), text_only=True)) as url:
        ids = _run(url, spec, tokens)
        text = _run(url, spec, tokens, send_ids=False)
    assert ids.summary.errors == 3
    assert all("HTTP 422" in r.error and "--send-text" in r.error for r in ids.results)
    assert text.summary.errors == 0 and text.summary.completed == 3
