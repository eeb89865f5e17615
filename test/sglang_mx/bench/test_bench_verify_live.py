"""On the suite's live bundled-MXFP4 SGLang server (--enable-metrics): the public 2,626 tok/s
claim, scaled to fit, verified end to end (verdict, interval, audit against SGLang's own
Prometheus counters, self-check, report); the Mooncake and ledger sample traces replayed with
their prefix sharing measured in SGLang's cached tokens."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from sglang_mx.bench import cli as bench_cli

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


# Mooncake: on 2026-12-01 SGLang reported 6,144 of the 9,216 designed cached tokens (each repeat
# one 512-token block short; not yet explained, docs/benchmark.md), so its floor is lower
@pytest.mark.parametrize(("name", "floor"), [("sample-mooncake.jsonl", 0.5),
                                             ("sample-ledger.jsonl", 0.9)])  # fmt: skip
def test_trace_sharing_measured_on_server(
    live_server, bundled_tokenizer_dir, tmp_path, name, floor
):
    argv = ["bench", "run", "--url", live_server, "--tokenizer", bundled_tokenizer_dir,
            "--trace", str(ROOT / "benchmark" / "traces" / name), "--trace-time-scale", "3",
            "--warmup", "0", "--no-progress", "-o", str(tmp_path)]  # fmt: skip
    assert _main(argv) in (0, 1)  # 1 only for a failed audit, asserted below
    s = json.loads((tmp_path / "result.json").read_text())["sweep"]["points"][0]["summary"]
    assert s["errors"] == 0, s["first_error"]
    assert s["audit"]["ok"], s["audit"]["message"]
    # SGLang's radix cache found the shared blocks / rebuilt prefixes the trace designed
    assert s["expected_cached_tokens"] > 0.4 * s["input_tokens"]
    assert s["cached_tokens"] >= floor * s["expected_cached_tokens"], (
        s["cached_tokens"], s["expected_cached_tokens"])  # fmt: skip
