"""`bench verify` end to end against the in-process fake server (real HTTP): a claim far below
what the fake delivers is reproduced, one far above is not, and verdict.json, report.html and the
plots are written beside result.json."""

from __future__ import annotations

import argparse
import dataclasses
import json
from types import SimpleNamespace

import pytest
from bench_processes import fake_server_process
from claim_files import write_claim
from sglang_mx.bench.claims.verdict import Verdict
from sglang_mx.bench.cli import verbs as bench_cli
from verdict_retry import a_repeat_client_bound, until_decided


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def _claim(tmp_path, value: float, **over) -> str:
    return write_claim(tmp_path, value, **over)


@pytest.mark.parametrize(("value", "status", "verdict"), [(1.0, 0, "reproduced"),
                                                          (1e9, 1, "not reproduced")])  # fmt: skip
def test_verify_against_fake_server(tmp_path, tiny_tokenizer, value, status, verdict):
    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    claim = _claim(tmp_path, value)

    def run(out):
        argv = ["bench", "verify", claim, "--url", url, "--tokenizer", str(tmp_path),
                "--hardware", "MI355X", "--repeats", "3", "--warmup", "0",
                "--no-progress", "-o", str(out)]  # fmt: skip
        return _main(argv), json.loads((out / "verdict.json").read_text())

    with fake_server_process() as url:  # rerun only a verdict left open by a starved client
        got, v, out = until_decided(run, tmp_path / "out")
    assert got == status, v["reasons"]
    assert v["verdict"] == verdict, v["reasons"]
    assert len(v["values"]) == 3 and v["claimed"] == value
    lo, hi = v["ci95"]
    assert lo <= v["measured"] <= hi
    assert v["ratio"] == pytest.approx(v["measured"] / value)
    assert v["scaled"] is False and v["reasons"]
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"]["verdict"] == verdict
    # verdict.json is the typed record's file form, read back from result.json unchanged
    record = Verdict.from_dict(result["verdict"])
    assert (out / "verdict.json").read_text() == record.file_json()
    assert Verdict.from_json(record.to_json()) == record
    s = result["sweep"]["points"][0]["summary"]
    assert s["audit"]["ok"], s["audit"]
    assert {c["check"] for c in s["audit"]["checks"]} >= {
        "generation_tokens: usage vs server counter",
        "prompt tokens: client vs usage",
    }
    assert "selfcheck" in s and s["server_metrics"]["samples"] >= 1
    assert result["cost"]["price_source"].startswith("data/hardware.json MI355X")
    html = (out / "report.html").read_text()
    assert f"Verdict: {verdict.upper()}" in html and 'src="throughput_vs_load.png"' in html
    assert (out / "throughput_vs_load.png").read_bytes()[:4] == b"\x89PNG"


def test_verify_honours_every_slo_flag_and_a_zero_tolerance(tmp_path, tiny_tokenizer):
    """Issue 43: a --slo* flag given replaces the claim's value (and the verdict says so); a
    planted --slo-ttft 0.001 against a claim the fake easily meets makes it not reproduced;
    --tolerance 0 is 0, not the claim's."""
    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    out = tmp_path / "out"
    claim = _claim(tmp_path, 1.0, tolerance=0.5)
    with fake_server_process() as url:
        argv = ["bench", "verify", claim, "--url", url, "--tokenizer", str(tmp_path),
                "--hardware", "MI355X", "--repeats", "3", "--warmup", "0", "--no-progress",
                "-o", str(out), "--slo-ttft", "0.001", "--slo-itl", "60",
                "--tolerance", "0"]  # fmt: skip
        assert _main(argv) == 1
    v = json.loads((out / "verdict.json").read_text())
    assert v["verdict"] == "not reproduced", v["reasons"]
    assert v["tolerance"] == 0
    assert v["slo_source"].startswith("the command line's over the claim's: --slo-ttft 0.001")
    assert "--slo-itl 60" in v["slo_source"] and "ITL p95 <= 60.0 s" in v["slo_source"]
    assert any("missed the SLO: TTFT p95" in r and "> 0.001 s" in r for r in v["reasons"])


def test_verify_refuses_a_bad_slo_flag_before_any_run(tmp_path, capsys):
    claim = _claim(tmp_path, 1.0)
    argv = ["bench", "verify", claim, "--url", "http://127.0.0.1:9", "--tokenizer", str(tmp_path),
            "--slo-tpot", "0"]  # fmt: skip
    assert _main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == "sglang-mx bench: --slo-tpot 0.0: a limit in seconds must be > 0"


DRAFT = {"algorithm": "EAGLE 3/1/4", "accept_length": 2.0, "simulated": False}
# (the fake's planted fault, the claimed output tok/s, exit status, verdict, a reason's words,
# the claim's speculative section)
LIARS = [
    ({}, 1.0, 0, "reproduced", "is at least"),
    ({}, 1e9, 1, "not reproduced", "is not at least"),
    ({"fail_every": 4}, 1.0, 1, "not reproduced", "requests failed"),
    ({"short_by": 2}, 1.0, 1, "not reproduced", "token audit failed"),
    ({"count_extra_generation": 3}, 1.0, 1, "not reproduced", "token audit failed"),
    ({"spec_accept": 2.67}, 1.0, 0, "reproduced", "accept length 2.67 measured against 2"),
    ({}, 1.0, 1, "not reproduced", "ran no verify step: the draft is off"),
    ({"spec_accept": 1.6}, 1.0, 1, "not reproduced", "accept length 1.6 measured"),
    ({"spec_accept": 1.6}, 1.0, 0, "reproduced", "simulated acceptance (accept length 2)"),
]
CLAIM_DRAFT = [None, None, None, None, None, DRAFT, DRAFT, DRAFT, {**DRAFT, "simulated": True}]
LIARS = [(*liar, draft) for liar, draft in zip(LIARS, CLAIM_DRAFT, strict=True)]


@pytest.mark.parametrize(("fault", "value", "status", "verdict", "reason", "draft"), LIARS)
def test_a_cpu_claim_is_judged_on_its_own_hardware(
    tmp_path, tiny_tokenizer, fault, value, status, verdict, reason, draft
):
    """Issue 45: a claim may name `CPU` hardware and `--hardware CPU --gpus 1` matches it, so
    the run is judged: failed requests and a server whose usage disagrees with what it streamed
    or with its own counters are refuted (not inconclusive), as a too-low interval is; a claimed
    draft is held to the acceptance the server's counters show (absent or low: refuted), and a
    simulated one is reported beside the real."""
    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    out = tmp_path / "out"
    extra = {"speculative": draft} if draft else {}
    claim = _claim(tmp_path, value, hardware={"name": "CPU", "gpus": 1}, **extra)

    def run(where):
        argv = ["bench", "verify", claim, "--url", url, "--tokenizer", str(tmp_path),
                "--hardware", "CPU", "--gpus", "1", "--repeats", "3", "--warmup", "0",
                "--no-progress", "-o", str(where)]  # fmt: skip
        return _main(argv), json.loads((where / "verdict.json").read_text())

    with fake_server_process(**fault) as url:  # no row expects inconclusive: rerun a starved one
        got, v, out = until_decided(run, out, left_open=a_repeat_client_bound)
    assert got == status, v["reasons"]
    assert v["verdict"] == verdict and any(reason in r for r in v["reasons"]), v["reasons"]
    assert not any("hardware under test" in r for r in v["reasons"])
    result = json.loads((out / "result.json").read_text())
    assert result["cost"]["price_source"].startswith("the claim's price")
    if draft:
        assert v["acceptance"]["claimed"] == draft["accept_length"]
        assert len(v["acceptance"]["measured"]) == 3


def test_a_missing_figure_is_an_error_naming_it():
    """A claimed figure the run's summary lacks is refused by name, not judged as NaN."""
    from sglang_mx.bench.claims.judge import BenchError, figure_value
    from sglang_mx.measure.metrics import RequestResult, summarize

    # every request failed: no latency was measured, so every distribution is NaN
    summary = dataclasses.replace(summarize([RequestResult("r0", error="x")]), output_tok_s=5.0)
    assert figure_value(summary, "output_tok_s") == 5.0
    with pytest.raises(BenchError, match="no 'ttft_s.p99'"):
        figure_value(summary, "ttft_s.p99")


def test_a_box_outside_the_hardware_table_is_judged_a_different_box(tmp_path):
    """`--hardware CPU` against an MI355X claim: a blocker naming both (it once raised "unknown
    hardware" after the whole run); the cost is the claim's price, named so, unless --price."""
    from sglang_mx.bench.claims.claim_file import load_claim
    from sglang_mx.bench.claims.judge import JudgeSettings, hardware_blockers
    from sglang_mx.bench.cli import verify_cli as verify

    claim = load_claim(write_claim(tmp_path, 100.0))  # 8x MI355X
    blockers = hardware_blockers(claim, JudgeSettings(hardware="CPU", gpus=None))
    assert blockers == [
        "hardware under test 1x CPU is not the claim's 8x MI355X: a run on 8x MI355X would decide"
    ]
    args = argparse.Namespace(hardware="CPU", gpus=1, price=None)
    rates = SimpleNamespace(output_tok_s=10.0, total_tok_s=20.0, input_tok_s=10.0, hit_rate=0.0,
                            goodput_output_tok_s=None, goodput_req_s=None)  # fmt: skip
    cost = verify._cost(claim, args, rates)
    assert cost["price_per_gpu_hour"] == 1.48 and cost["gpus"] == 8
    assert cost["price_source"].startswith("the claim's price")
    priced = verify._cost(claim, argparse.Namespace(hardware="CPU", gpus=1, price=0.05), rates)
    assert (priced["price_per_gpu_hour"], priced["gpus"]) == (0.05, 1)
