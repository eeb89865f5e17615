"""`bench verify --reference` (bench/run/agreement.py, issue 45 item 3): the endpoint's agreement
with a reference deployment of the same model gates the verdict. Live on the CPU box: the MXFP4
session server against a bf16 server of the same model agrees within the claim's bound and the
claim is reproduced; a server of a checkpoint with a planted quantization bug (E2M1 nibbles
swapped: sglang_mx_lab.testing.planted_checkpoints) serves without complaint and is refuted, by
the accuracy gate, through the CLI, exit codes checked. The gate's arithmetic without servers."""

from __future__ import annotations

import argparse
import json
import math

import pytest
from claim_files import write_claim
from sglang_mx.bench.claims.judge import agreement_bounds, agreement_gate
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.bench.load.limits import BenchError
from sglang_mx.bench.run import agreement

# Bound stated in the test's claim: MXFP4 experts against bf16 measured 0.9+ top-1 on this model
# (docs/tiny-model.md: held-out perplexity +0.2%); a broken packing is far below.
TOP1_MIN = 0.85


def test_kl_topk_is_zero_for_equal_distributions_and_grows_with_disagreement():
    ref = {"a": math.log(0.6), "b": math.log(0.3), "c": math.log(0.05)}
    assert agreement._kl_topk(ref, dict(ref)) == pytest.approx(0.0, abs=1e-12)
    near = {"a": math.log(0.55), "b": math.log(0.35), "c": math.log(0.05)}
    far = {"x": math.log(0.9), "a": math.log(0.01), "y": math.log(0.05)}
    assert 0 < agreement._kl_topk(ref, near) < agreement._kl_topk(ref, far)
    # ref's tokens missing from the endpoint's top-k get its k-th log-probability (0.01 here)
    exact = 0.6 * math.log(0.6 / 0.01) + 0.3 * math.log(0.3 / 0.01) + 0.05 * math.log(0.05 / 0.01)
    rest = 0.05 * math.log(0.05 / (1 - 0.03))
    assert agreement._kl_topk(ref, far) == pytest.approx(exact + rest)


def test_bounds_come_from_the_flag_then_the_claim_then_the_default():
    claim = {"agreement": {"top1_min": 0.9, "kl_max": 0.1, "source": "vendor card"}}
    assert agreement_bounds(claim, None) == (0.9, 0.1, "the claim's (vendor card)")
    assert agreement_bounds(claim, 0.5) == (0.5, 0.1, "--agreement-top1 0.5")
    assert agreement_bounds({}, None)[:2] == (agreement.DEFAULT_TOP1, None)
    with pytest.raises(BenchError, match="a share in"):
        agreement_bounds({}, 1.5)


def test_judge_refutes_below_the_bound_and_notes_within():
    rec = {"reference": "http://ref", "top1": 0.5, "kl_topk_mean": 0.2, "top_k": 5,
           "positions": 100}  # fmt: skip
    low = agreement_gate(rec, 0.8, None, "the default")
    assert low["failures"] and "top-1 0.500" in low["failures"][0] and not low["notes"]
    ok = agreement_gate({**rec, "top1": 0.95}, 0.8, None, "the default")
    assert ok["notes"] and not ok["failures"]
    kl = agreement_gate({**rec, "top1": 0.95}, 0.8, 0.1, "the claim's")
    assert kl["failures"] and "KL <= 0.1" in kl["failures"][0]
    assert agreement_gate(None, 0.8, None, "x") == {"failures": [], "notes": []}


@pytest.fixture(scope="module")
def reference_and_planted(tmp_path_factory):
    """A bf16 server of the MXFP4 session server's model, and one of its MXFP4 checkpoint with
    the nibbles of every packed expert weight swapped."""
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.planted_checkpoints import swap_nibbles
    from sglang_mx_lab.testing.server import start_servers

    planted = tmp_path_factory.mktemp("planted") / "swapped-nibbles"
    assert swap_nibbles(bundled_model_path("mxfp4"), planted) > 0
    args = ["--enable-cache-report", "--enable-metrics"]
    handles = start_servers(
        [(bundled_model_path("bf16"), args, None, None), (str(planted), args, None, None)],
        timeout=600,
    )
    try:
        yield handles[0].base_url, handles[1].base_url
    finally:
        for h in handles:
            h.stop(wait=False)


def _claim(tmp_path) -> str:
    """A claim about this CPU box well below what the server does, with an agreement bound."""
    workload = {"input_len": 64, "output_len": 8, "hit_rate": 0.5, "prefix_groups": 2,
                "num_requests": 4, "arrival": "concurrency", "concurrency": 2}  # fmt: skip
    agreed = {"top1_min": TOP1_MIN, "source": "bf16 deployment of the same model"}
    return write_claim(tmp_path, 1.0, hardware={"name": "CPU", "gpus": 1}, workload=workload,
                       slo={"ttft_s": 60.0}, agreement=agreed)  # fmt: skip


def _verify(url: str, reference: str, claim: str, tokenizer: str, out) -> tuple[int, dict]:
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "verify", claim, "--url", url, "--tokenizer", tokenizer,
                              "--hardware", "CPU", "--gpus", "1", "--repeats", "2", "--reference",
                              reference, "--agreement-tokens", "16", "--warmup", "1",
                              "--no-progress", "-o", str(out)])  # fmt: skip
    status = args.func(args)
    return status, json.loads((out / "verdict.json").read_text())


@pytest.mark.server
def test_mxfp4_agrees_with_bf16_and_a_planted_bug_is_refuted(
    live_server, reference_and_planted, bundled_tokenizer_dir, tmp_path
):
    bf16, planted = reference_and_planted
    claim = _claim(tmp_path)
    status, good = _verify(live_server, bf16, claim, bundled_tokenizer_dir, tmp_path / "mxfp4")
    a = good["agreement"]
    assert a["top1"] >= TOP1_MIN and a["positions"] > 250, a
    assert any("within top-1 >= 0.85" in r for r in good["reasons"]), good["reasons"]
    assert not any(r.startswith("accuracy: ") for r in good["reasons"]), good["reasons"]
    # The speed verdict is test_bench_verify_liars.py's; on a box loaded by the suite a repeat
    # may be client-bound, or two repeats far apart (69.7 and 108.7 tok/s, 2026-12-05) give an
    # interval that straddles: either leaves only the speed figure unjudged
    if good["verdict"] != "reproduced":
        assert good["verdict"] == "inconclusive", good["reasons"]
        unjudged = ("client-bound", "agreement", "straddles")
        assert all(any(w in r for w in unjudged) for r in good["reasons"]), good

    status, bad = _verify(planted, bf16, claim, bundled_tokenizer_dir, tmp_path / "planted")
    assert (status, bad["verdict"]) == (1, "not reproduced"), bad["reasons"]
    assert any(r.startswith("accuracy: ") for r in bad["reasons"]), bad["reasons"]
    assert bad["agreement"]["top1"] < TOP1_MIN <= a["top1"]
    assert bad["agreement"]["kl_topk_mean"] > good["agreement"]["kl_topk_mean"]
