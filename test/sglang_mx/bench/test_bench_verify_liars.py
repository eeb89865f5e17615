"""`bench verify` against the live CPU server, on a claim about this CPU box (issue 45, item 2):
an honest run of a claim below what the server does reproduces it; lying proxies in front of the
same server (sglang_mx_lab.testing.liar_proxy) are refuted, each for its own reason: slower
streams against a claim near what the server does (the interval), inflated usage (the token
audit against the stream and SGLang's own counters), failed requests. Through the CLI, exit
codes checked."""

from __future__ import annotations

import argparse
import json

import pytest
from claim_files import write_claim
from sglang_mx.bench import cli as bench_cli
from sglang_mx_lab.testing.liar_proxy import Lies, liar_proxy

pytestmark = pytest.mark.server


def _claim(tmp_path, value: float, **sections) -> str:
    """A claim about this CPU box: 6 requests of 64 tokens in, 16 out, two at a time."""
    workload = {"input_len": 64, "output_len": 16, "hit_rate": 0.5, "prefix_groups": 2,
                "num_requests": 6, "arrival": "concurrency", "concurrency": 2}  # fmt: skip
    return write_claim(tmp_path, value, hardware={"name": "CPU", "gpus": 1}, workload=workload,
                       slo={"ttft_s": 60.0}, **sections)  # fmt: skip


def _verify(url: str, claim: str, tokenizer: str, out) -> tuple[int, dict]:
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "verify", claim, "--url", url, "--tokenizer", tokenizer,
                              "--hardware", "CPU", "--gpus", "1", "--repeats", "3",
                              "--warmup", "1", "--no-progress", "-o", str(out)])  # fmt: skip
    status = args.func(args)
    return status, json.loads((out / "verdict.json").read_text())


def _client_bound_only(verdict: dict) -> bool:
    return verdict["verdict"] == "inconclusive" and all(
        "client-bound" in r for r in verdict["reasons"]
    )


def _verify_decided(url: str, claim: str, tokenizer: str, out, tries: int = 3):
    """_verify, run again (into out-2, out-3) while the verdict is inconclusive only because
    every failing repeat was client-bound: the load generator shares this 2-core box with the
    server and the suite's other worker, and a starved client is what the verdict asks to rerun
    (CI 2026-12-05: event-loop lag p99 51 and 60 ms against 50 in two honest repeats)."""
    for attempt in range(1, tries + 1):
        where = out if attempt == 1 else out.with_name(f"{out.name}-{attempt}")
        status, verdict = _verify(url, claim, tokenizer, where)
        if not _client_bound_only(verdict):
            break
    return status, verdict, where


def test_honest_server_reproduces_and_each_liar_is_refuted(
    live_server, bundled_tokenizer_dir, tmp_path
):
    status, honest, _ = _verify_decided(live_server, _claim(tmp_path, 1.0),
                                        bundled_tokenizer_dir, tmp_path / "honest")  # fmt: skip
    assert (status, honest["verdict"]) == (0, "reproduced"), honest["reasons"]
    # A claim near what the server does (0.8x its measured mean, tolerance 10%) reproduces
    # honestly; through a proxy holding each streamed event 0.1 s it cannot.
    near = _claim(tmp_path, 0.8 * honest["measured"])
    cases = [
        (Lies(delay_s=0.1), near, "is not at least"),
        (Lies(inflate=3), _claim(tmp_path, 1.0), "token audit failed"),
        (Lies(fail_every=4), _claim(tmp_path, 1.0), "requests failed"),
    ]
    written = []
    for i, (lies, claim, reason) in enumerate(cases):
        with liar_proxy(live_server, lies) as url:
            status, v, where = _verify_decided(url, claim, bundled_tokenizer_dir,
                                               tmp_path / f"liar-{i}")  # fmt: skip
        assert (status, v["verdict"]) == (1, "not reproduced"), (lies, v["reasons"])
        assert any(reason in r for r in v["reasons"]), (lies, v["reasons"])
        written.append(where)
    slow = json.loads((written[0] / "verdict.json").read_text())
    assert slow["measured"] < 0.5 * honest["measured"], (slow["measured"], honest["measured"])


def test_a_draft_claimed_on_a_server_without_one_is_refuted(
    live_server, bundled_tokenizer_dir, tmp_path
):
    """The suite's server runs no draft (no --speculative-algorithm): a claim that states an
    EAGLE accept length of 2.0 is refuted by the acceptance gate, from SGLang's own counters
    (no verify step ran), though its figure is far below what the server does."""
    spec = {"algorithm": "EAGLE", "accept_length": 2.0, "simulated": False, "source": "test"}
    claim = _claim(tmp_path, 1.0, speculative=spec)
    status, v = _verify(live_server, claim, bundled_tokenizer_dir, tmp_path / "no-draft")
    assert (status, v["verdict"]) == (1, "not reproduced"), v["reasons"]
    assert any("the draft is off" in r for r in v["reasons"]), v["reasons"]
    assert v["acceptance"]["claimed"] == 2.0
