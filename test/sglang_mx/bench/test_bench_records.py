"""Typed records (issue 43): a verdict built by the real code path (judge.judge over a shipped
claim) survives its JSON round trip field for field, verdict.json is the subset of it that file
has always held, and a record with a field it does not know is refused by name; a run summary
from metrics.summarize (and each committed one in docs/results) survives its round trip, and a
figure name no summary has is refused where a claim names it, before any run; a sweep point and
the knee survive theirs, and the committed ones read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from sglang_mx.bench.claims import judge
from sglang_mx.bench.claims.claim_file import ClaimError, load_claim
from sglang_mx.bench.claims.verdict import FILE_KEYS, Verdict
from sglang_mx.bench.load.client_check import selfcheck
from sglang_mx.bench.run.audit import audit
from sglang_mx.measure.metrics import RequestResult, Slo, summarize
from sglang_mx.measure.run_checks import Acceptance
from sglang_mx.measure.summary import FIGURES, Distribution, RunSummary, is_figure
from sglang_mx.measure.sweep import Knee, SweepPoint, knee

ROOT = Path(__file__).resolve().parents[3]
CLAIMS = ROOT / "benchmark" / "claims"


def _summary(total_tok_s: float) -> RunSummary:
    """One clean repeat with a real draft, as judge.judge reads it: its audit and self-check
    from the runner's own checks (nothing off, nothing late)."""
    sent = [RequestResult(f"r{i}", lag=0.001 * i) for i in range(3)]
    return dataclasses.replace(
        _run_summary(),
        total_tok_s=total_tok_s,
        requests=3,
        errors=0,
        audit=audit([], {}, ignore_eos=False),
        selfcheck=selfcheck(sent, [0.001, 0.002], [0.1], 1.0),
        speculative=Acceptance(True, True, 2.4),
    )


def _judged() -> Verdict:
    """A shipped claim with a draft (acceptance record), judged with an agreement record."""
    claim = load_claim(CLAIMS / "glm5-fp8-mi355x-inferencex-8k1k-mtp.yaml")
    settings = judge.JudgeSettings(hardware="MI355X", gpus=4)
    agreed = {"reference": "http://ref", "top1": 0.93, "top_k": 5, "kl_topk_mean": 0.02,
              "positions": 96, "per_prompt": [{"prompt": 0}]}  # fmt: skip
    summaries = [_summary(x * 4) for x in (1900.0, 1880.0, 1910.0)]
    return judge.judge(claim, summaries, ["lengths x0.5"], settings, 4, agreed=agreed)


def test_a_judged_verdict_survives_its_json_round_trip():
    v = _judged()
    assert v.verdict == "inconclusive" and v.scaled and v.repeats == 3  # scaled: no decision
    assert v.acceptance["measured"] == [2.4, 2.4, 2.4] and "per_prompt" not in v.agreement
    assert Verdict.from_json(v.to_json()) == v
    assert Verdict.from_dict(json.loads(json.dumps(v.to_dict()))) == v


def test_verdict_json_keeps_its_keys_in_order():
    """verdict.json is FILE_KEYS of the full record, in the order the file has always had."""
    v = dataclasses.replace(_judged(), slo_source="the claim's")
    on_file = json.loads(v.file_json())
    assert tuple(on_file) == FILE_KEYS
    assert on_file == {k: v.to_dict()[k] for k in FILE_KEYS}
    assert on_file["ci95"] == list(v.ci95) and on_file["slo_source"] == "the claim's"


def test_a_record_with_an_unknown_field_is_refused_by_name():
    record = {**_judged().to_dict(), "ci_95": [0.0, 1.0]}
    with pytest.raises(TypeError, match="ci_95"):
        Verdict.from_dict(record)


def _run_summary() -> RunSummary:
    """metrics.summarize over three completed requests and one failed (no NaN figure)."""
    rs = [
        RequestResult(f"r{i}", start=i, ttft=0.5 + i, e2e=1.5 + i, itl=[0.1] * 10,
                      prompt_tokens=100, completion_tokens=11, cached_tokens=50,
                      expected_cached=60)
        for i in range(3)
    ] + [RequestResult("r3", start=3.0, error="HTTP 500")]  # fmt: skip
    return summarize(rs, Slo(ttft_p95_s=5.0, ttft_s=5.0, tpot_s=0.5))


def test_a_run_summary_survives_its_round_trip():
    record = _run_summary()
    assert isinstance(record.ttft_s, Distribution) and record.ttft_s.p50 == 1.5
    s = record.to_dict()
    assert RunSummary.from_dict(s) == record
    assert RunSummary.from_dict(json.loads(json.dumps(s))) == record
    # the runner's checks are typed parts, after the figures, in result.json's order; what
    # the planner adds rides in `extra`, after them
    full = dataclasses.replace(_summary(1.0), extra={"steps": 3})
    d = full.to_dict()
    assert list(d)[list(d).index("slo_met") + 1:] == ["audit", "speculative", "selfcheck",
                                                      "steps"]  # fmt: skip
    back = RunSummary.from_dict(json.loads(json.dumps(d)))
    assert back == full and back.audit.ok and back.speculative.accept_length == 2.4
    assert back.extra == {"steps": 3} and isinstance(back.selfcheck.reasons, tuple)


def _same(old: dict, out: dict) -> bool:
    """`out` holds every key of `old` with the same value (NaN too: compared as JSON text)."""
    return json.dumps({k: out[k] for k in old}) == json.dumps(old)


@pytest.mark.parametrize("path", sorted((ROOT / "docs" / "results").glob("*/result.json")))
def test_committed_summaries_points_and_knees_read_into_the_records(path):
    """Older results lack the fields added since (reachable_cached_tokens, slo_gates, the
    knee's slo): they read with those at their defaults, every figure they hold unchanged."""
    sweep = json.loads(path.read_text())["sweep"]
    for p in sweep["points"]:
        assert _same(p["summary"], RunSummary.from_dict(p["summary"]).to_dict())
        out = SweepPoint.from_dict(p).to_dict()
        assert list(out) == list(p) and _same(p["summary"], out["summary"])
    if sweep["knee"]:
        assert _same(sweep["knee"], Knee.from_dict(sweep["knee"]).to_dict())


def test_a_sweep_point_and_its_knee_survive_their_round_trips():
    point = SweepPoint(4.0, _run_summary(), {"model": "fake"})
    assert SweepPoint.from_dict(json.loads(json.dumps(point.to_dict()))) == point
    bare = SweepPoint(2, point.summary)  # a simulated point (plan) has no runner meta
    assert "meta" not in bare.to_dict() and SweepPoint.from_dict(bare.to_dict()) == bare
    clean = dataclasses.replace(point.summary, errors=0)
    points = [SweepPoint(x, clean) for x in (1.0, 2.0)]
    found = knee(points, Slo(ttft_p95_s=5.0))
    assert found.x == 2.0 and found.ttft_p95_s == clean.ttft_s.p95
    assert Knee.from_dict(json.loads(json.dumps(found.to_dict()))) == found
    assert knee(points, Slo(ttft_p95_s=0.01)) is None  # no point meets 10 ms


def test_figure_names_are_checked_where_a_claim_names_one(tmp_path):
    assert is_figure("tpot_s.p50") and is_figure("output_tok_s") and is_figure("ttft_s.max")
    assert not is_figure("tpot_s.p75") and not is_figure("ttft_p50") and not is_figure("slo")
    claim = yaml.safe_load((CLAIMS / "glm52-mxfp4-mi355x-8x-2626.yaml").read_text())
    claim["claimed"]["figure"] = "tpot_s.p75"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(claim))
    with pytest.raises(ClaimError, match="claimed.figure"):
        load_claim(path)
    with pytest.raises(judge.BenchError, match="'tpot_s.p75' is not a figure"):
        judge.figure_value(_run_summary(), "tpot_s.p75")
    assert "output_tok_s" in FIGURES and "ttft_s.p95" in FIGURES
