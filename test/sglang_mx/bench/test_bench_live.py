"""The whole pipeline at CPU scale against the live bundled-model server: generate, prime, run,
measure the hit rate, sweep two loads, write the report, through the `bench` CLI."""

from __future__ import annotations

import argparse
import json

import pytest
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer, materialize
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.capacity.workload import LengthDist, get_preset
from sglang_mx.measure.tracegen import generate

pytestmark = pytest.mark.server


def _input_len(model_dir: str, output_len: int, want: int) -> int:
    with open(f"{model_dir}/config.json") as f:
        ctx = json.load(f).get("max_position_embeddings", 4096)
    return min(want, ctx - output_len - 8)


def test_live_run_hits_designed_rate(live_server, bundled_tokenizer_dir):
    tokens = SegmentTokens(load_tokenizer(bundled_tokenizer_dir))
    spec = get_preset("cpu-2k-32-60").with_overrides(
        # 1k in / 8 out keeps the test to seconds on 2 shared cores; the design is length-free
        input_len=LengthDist("fixed", _input_len(bundled_tokenizer_dir, 8, 1024)),
        output_len=LengthDist("fixed", 8),
        num_requests=16,
        arrival="concurrency",
        concurrency=4,
    )
    trace = generate(spec)
    res = run_trace(
        trace, materialize(trace, tokens), RunConfig(base_url=live_server, progress=False), tokens
    )
    s = res.summary
    assert s.errors == 0, [r.error for r in res.results if r.error][:3]
    assert s.output_tokens == 16 * 8  # ignore_eos honoured
    assert s.input_tokens == sum(r.input_len for r in trace.requests)  # ids sent exactly
    assert abs(s.hit_rate - 0.6) <= 0.05, s.hit_rate
    assert not any("WARM" in w for w in res.warnings), res.warnings
    assert 0 < s.ttft_s.p50 <= s.ttft_s.p95 <= s.ttft_s.max


def test_live_sweep_via_cli(live_server, bundled_tokenizer_dir, tmp_path):
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    n_in = _input_len(bundled_tokenizer_dir, 4, 512)
    args = parser.parse_args(
        [
            "bench",
            "sweep",
            "--url",
            live_server,
            "--tokenizer",
            bundled_tokenizer_dir,
            "--input-len",
            str(n_in),
            "--output-len",
            "4",
            "--num-requests",
            "6",
            "--concurrencies",
            "1,4",
            "--hardware",
            "MI355X",
            "--gpus",
            "1",
            "--no-progress",
            "--warmup",
            "0",
            "-o",
            str(tmp_path),
        ]
    )
    assert args.func(args) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    points = result["sweep"]["points"]
    assert [p["x"] for p in points] == [1.0, 4.0]
    for p in points:
        assert p["summary"]["errors"] == 0
        assert abs(p["summary"]["hit_rate"] - 0.6) <= 0.05
    assert result["cost"]["usd_per_m_output"] > 0
    assert (tmp_path / "ttft_vs_load.png").stat().st_size > 0
    # the knee line is there whether or not a point met the SLO on this loaded machine
    assert "TTFT p95 <= 5.0 s" in (tmp_path / "report.md").read_text()
