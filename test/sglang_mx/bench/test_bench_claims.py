"""Claim files and verdicts: every shipped claim validates; a bad claim is refused one line per
bad field (through the CLI: exit 2, no traceback); the interval and the verdict rules against
hand-computed cases."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest
import yaml
from sglang_mx.bench.claims.claim_file import ClaimError, load_claim
from sglang_mx.bench.claims.verdict import ci95, decide
from sglang_mx.bench.cli import verbs as bench_cli

CLAIMS = sorted((Path(__file__).parents[3] / "benchmark" / "claims").glob("*.yaml"))


def test_shipped_claims_validate_and_state_their_sources():
    assert len(CLAIMS) >= 10
    ids = set()
    for path in CLAIMS:
        claim = load_claim(path)
        assert claim.id == path.stem and claim.id not in ids
        ids.add(claim.id)
        assert claim.raw["claimed"]["source"] and claim.raw["price"]["source"]
        if not claim.raw["workload"].get("public_trace"):  # a public trace is read, not run
            assert claim.spec().num_requests >= 1
    by_id = {load_claim(p).id: load_claim(p) for p in CLAIMS}
    main = by_id["glm52-mxfp4-mi355x-8x-2626"]
    assert (main.value, main.hardware, main.figure) == (2626, ("MI355X", 8), "output_tok_s")
    spec = main.spec()
    assert (spec.input_len.value, spec.output_len.value, spec.hit_rate, spec.rate) == (
        20000, 1000, 0.6, 2.4)  # fmt: skip
    assert by_id["glm52-b200-8x-3192"].value == 3192
    assert not by_id["glm52-fp8-mi355x-atom-1k1k-c1-tpot"].higher_is_better


def test_bad_claim_is_refused_one_line_per_field(tmp_path, capsys):
    raw = yaml.safe_load(CLAIMS[0].read_text())
    raw["workload"]["rate"] = "fast"
    raw["hardware"]["gpus"] = 0
    raw["claimed"]["figure"] = "tokens"
    raw["wrokload"] = {}
    del raw["price"]["source"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ClaimError) as err:
        load_claim(path)
    lines = str(err.value).splitlines()
    assert len(lines) == 5, lines
    for field in ("workload.rate", "hardware.gpus", "claimed.figure", "wrokload", "price.source"):
        assert sum(f": {field}:" in line for line in lines) == 1, (field, lines)
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "verify", str(path), "--url", "http://127.0.0.1:9",
                              "--tokenizer", str(tmp_path)])  # fmt: skip
    assert args.func(args) == 2
    err_text = capsys.readouterr().err
    assert "Traceback" not in err_text and err_text.count("sglang-mx bench: ") == 5
    path.write_text("schema: 1\nid: [unclosed\n")
    with pytest.raises(ClaimError, match="not valid YAML at line"):
        load_claim(path)


def test_interval_matches_hand_computation():
    mean, lo, hi = ci95([10.0, 12.0, 14.0])
    half = 4.303 * 2.0 / math.sqrt(3)  # t(0.975, 2) x sd 2 / sqrt(3)
    assert (mean, lo, hi) == pytest.approx((12.0, 12.0 - half, 12.0 + half))
    assert math.isnan(ci95([5.0])[1])


@pytest.mark.parametrize(
    ("values", "higher", "verdict"),
    [
        ([100.0, 101.0, 99.0], True, "reproduced"),  # all above 0.9 x 100
        ([50.0, 52.0, 51.0], True, "not reproduced"),  # all below 90
        ([60.0, 120.0, 90.0], True, "inconclusive"),  # straddles 90
        ([0.010, 0.011, 0.012], False, "reproduced"),  # a latency at or below 1.1 x claimed
        ([0.030, 0.031, 0.029], False, "not reproduced"),
    ],
)
def test_verdict_rules(values, higher, verdict):
    claimed = 100.0 if higher else 0.0125
    v = decide(claimed, values, higher, 0.10)
    assert v.verdict == verdict, v.reasons
    assert v.ratio == pytest.approx(sum(values) / len(values) / claimed)


def test_blockers_and_failures_override_the_numbers():
    good = [100.0, 101.0, 99.0]
    v = decide(100.0, good, True, 0.1, blockers=["workload scaled"])
    assert v.verdict == "inconclusive" and "workload scaled" in v.reasons
    v = decide(100.0, good, True, 0.1, failures=["repeat 1 missed the claim's SLO"])
    assert v.verdict == "not reproduced"
    assert decide(100.0, [100.0], True, 0.1).verdict == "inconclusive"  # no interval
    # A client-bound run cannot judge its figure, but what it saw fail still refutes; a run that
    # cannot speak for the claim at all (other hardware) stays inconclusive even so.
    bound = ["repeat 1: client-bound"]
    assert decide(100.0, good, True, 0.1, figure_blockers=bound).verdict == "inconclusive"
    v = decide(100.0, good, True, 0.1, failures=["token audit failed"], figure_blockers=bound)
    assert v.verdict == "not reproduced" and bound[0] in v.reasons
    v = decide(100.0, good, True, 0.1, ["other hardware"], ["token audit failed"], bound)
    assert v.verdict == "inconclusive"
