"""On the suite's live bundled-MXFP4 SGLang server (--enable-metrics): the public 2,626 tok/s
claim, scaled to fit, verified end to end (verdict, interval, audit against SGLang's own
Prometheus counters, self-check, report); the Mooncake and ledger sample traces replayed with
their prefix sharing measured in SGLang's cached tokens, request by request between what the
server held when each was sent and what it could find by its first token."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx
import pytest
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer
from sglang_mx.bench.load.traceio import load_trace
from sglang_mx.measure.tracegen import TraceRequest

pytestmark = pytest.mark.server
ROOT = Path(__file__).parents[3]


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_verify_scaled_public_claim(live_server, bundled_tokenizer_dir, tmp_path):
    claim = ROOT / "benchmark" / "claims" / "glm52-mxfp4-mi355x-8x-2626.yaml"
    argv = ["bench", "verify", str(claim), "--url", live_server, "--tokenizer",
            bundled_tokenizer_dir, "--fit-context", "630", "--num-requests", "6",
            "--repeats", "2", "--warmup", "1", "--no-progress", "-o", str(tmp_path)]  # fmt: skip
    assert _main(argv) == 1  # a scaled run cannot reproduce the claim
    v = json.loads((tmp_path / "verdict.json").read_text())
    assert v["verdict"] == "inconclusive" and v["scaled"] is True
    assert any("workload scaled" in r for r in v["reasons"])
    assert any("hardware under test not stated" in r for r in v["reasons"])
    assert len(v["values"]) == 2 and v["values"][0] > 0 and v["claimed"] == 2626
    assert v["ci95"][0] <= v["measured"] <= v["ci95"][1]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["workload"]["input_len"]["value"] < 630  # 20k in scaled into the context
    for p in result["sweep"]["points"]:
        s = p["summary"]
        assert s["errors"] == 0, s["first_error"]
        a = s["audit"]
        assert a["ok"], a["message"]
        checks = {c["check"]: c for c in a["checks"]}
        # SGLang's own counters, before and after: the same tokens as usage
        assert checks["generation_tokens: usage vs server counter"]["server"] == s["output_tokens"]
        assert checks["prompt_tokens: usage vs server counter"]["server"] == s["input_tokens"]
        assert s["output_tokens"] == 6 * result["workload"]["output_len"]["value"]
        assert s["selfcheck"]["schedule_lag_s"]["n"] == 6
        assert s["server_metrics"]["engine"] == "sglang"
    html = (tmp_path / "report.html").read_text()
    assert "Verdict: INCONCLUSIVE" in html and "token audit ok" in html
    assert "THE WORKLOAD WAS SCALED" in (tmp_path / "report.md").read_text()


# SGLang caches a prompt once its prefill result is processed, so a request sent while the
# request that first carried its prefix is still queued or in prefill cannot find it: on this
# 2-core box the Mooncake sample's repeats often overlap their chain's first request (2026-12-01:
# 6,144 of 9,216 designed tokens, later 3,584 under heavier load). The bar is therefore per
# request and exact: at least what the server provably held when it was sent (an earlier sharer
# had streamed its first token), at most what it could find by its own first token; replayed on
# a quiet box the two bounds are the whole 9,216-token design (test_bench_reach.py).
MOONCAKE_DESIGN = 3 * (3 + 2 + 1) * 512  # 3 repeats of chains of 3, 2 and 1 blocks


@pytest.mark.parametrize("name", ["sample-mooncake.jsonl", "sample-ledger.jsonl"])
def test_trace_sharing_measured_on_server(live_server, bundled_tokenizer_dir, tmp_path, name):
    argv = ["bench", "run", "--url", live_server, "--tokenizer", bundled_tokenizer_dir,
            "--trace", str(ROOT / "benchmark" / "traces" / name), "--trace-time-scale", "3",
            "--warmup", "0", "--no-progress", "-o", str(tmp_path)]  # fmt: skip
    assert _main(argv) in (0, 1)  # 1 only for a failed audit, asserted below
    s = json.loads((tmp_path / "result.json").read_text())["sweep"]["points"][0]["summary"]
    assert s["errors"] == 0, s["first_error"]
    assert s["audit"]["ok"], s["audit"]["message"]
    assert s["expected_cached_tokens"] > 0.4 * s["input_tokens"]
    if name.startswith("sample-mooncake"):
        assert s["expected_cached_tokens"] == MOONCAKE_DESIGN
    # SGLang's radix cache found, request by request, every shared block / rebuilt prefix the
    # server held when the request was sent, and nothing it could not have held
    bounds = s["cache_bounds"]
    assert bounds["below_reachable"] == 0 == bounds["above_possible"], bounds["first"]
    assert s["reachable_cached_tokens"] <= s["cached_tokens"] <= s["possible_cached_tokens"] + (
        4 * s["completed"])  # fmt: skip
    assert s["possible_cached_tokens"] <= s["expected_cached_tokens"]
    if name.startswith("sample-mooncake"):
        _chains_still_cached(live_server, bundled_tokenizer_dir)


def _chains_still_cached(url: str, tokenizer_dir: str) -> None:
    """Whatever the replay's timing was, its chains are now in the cache: a request made of a
    chain's blocks and a tail of its own finds every block, to the token."""
    trace = load_trace(ROOT / "benchmark" / "traces" / "sample-mooncake.jsonl")
    tokens = SegmentTokens(load_tokenizer(tokenizer_dir))  # as the CLI builds them
    chains = {tuple(r.segments[:-1]) for r in trace.requests}
    assert sorted(sum(n for _, n in c) for c in chains) == [512, 1024, 1536]
    model = httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
    for chain in chains:
        probe = TraceRequest("probe", 0, 0, [*chain, ("probe-tail", 7)], 1, 0)
        body = {"model": model, "prompt": tokens.prompt_ids(probe), "max_tokens": 1}
        usage = httpx.post(f"{url}/v1/completions", json=body, timeout=120).json()["usage"]
        assert usage["prompt_tokens_details"]["cached_tokens"] == sum(n for _, n in chain), chain
