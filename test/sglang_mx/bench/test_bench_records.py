"""Typed records (issue 43): a verdict built by the real code path (verify.judge over a shipped
claim) survives its JSON round trip field for field, verdict.json is the subset of it that file
has always held, and a record with a field it does not know is refused by name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from sglang_mx.bench import verify
from sglang_mx.bench.claims import load_claim
from sglang_mx.bench.verdict import FILE_KEYS, Verdict

CLAIMS = Path(__file__).resolve().parents[3] / "benchmark" / "claims"


def _summary(total_tok_s: float) -> dict:
    """The parts of a run summary verify.judge reads: one clean repeat with a real draft."""
    return {
        "total_tok_s": total_tok_s,
        "requests": 8,
        "errors": 0,
        "first_error": "",
        "audit": {"ok": True, "message": ""},
        "selfcheck": {"client_bound": False, "reasons": []},
        "slo_gates": [
            {"metric": "ttft_s", "percentile": 95, "value": 0.5, "limit": 5.0, "met": True}
        ],
        "speculative": {"counted": True, "speculative": True, "accept_length": 2.4},
    }


def _judged() -> Verdict:
    """A shipped claim with a draft (acceptance record), judged with an agreement record."""
    claim = load_claim(CLAIMS / "glm5-fp8-mi355x-inferencex-8k1k-mtp.yaml")
    args = SimpleNamespace(tolerance=None, hardware="MI355X", gpus=4, agreement_top1=None)
    agreed = {"reference": "http://ref", "top1": 0.93, "top_k": 5, "kl_topk_mean": 0.02,
              "positions": 96, "per_prompt": [{"prompt": 0}]}  # fmt: skip
    summaries = [_summary(x * 4) for x in (1900.0, 1880.0, 1910.0)]
    return verify.judge(claim, summaries, ["lengths x0.5"], args, 4, agreed=agreed)


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
