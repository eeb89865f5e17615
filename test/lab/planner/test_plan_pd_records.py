"""The committed PD planner runs (docs/results/planner-validation-pd-cpu/) checked as records:
each run's frozen prediction hashes to what the run recorded and is the prediction it judged; its
knee error follows from that prediction and the measured points (recomputed here); the prediction
was not written after the sweep's first request; the SLA is the fixed one; the sweep's prompt
lengths are in none of the calibration batches; the headline file is collected from these runs
and its code-unchanged flag diffs the lab too. A tampered copy of a run fails each check
(`test_a_tampered_run_fails_each_check`), so the checks are not vacuous.

What the runs of 2026-12-03 cannot show: they stamped the prediction and the sweep's start to the
second, and the two stamps are equal, so they show the prediction was not written later than
that second, not that it came first. Runs from 2026-12-06 on stamp both to the microsecond and
record the first request's time (`first_request_at`): for them the order must be proven."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from sglang_mx_lab.planner import preregister as P
from sglang_mx_lab.planner import step_fit
from sglang_mx_lab.planner import validate_pd_cpu as V
from sglang_mx_lab.planner.validate_cpu import compare

ROOT = Path(__file__).parents[3]
RUNS = ROOT / V.RUNS
SUMMARY = ROOT / V.OUT


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the records name their prediction files from the repo root


def _runs() -> list[tuple[str, dict]]:
    return [(p.name, json.loads(p.read_text())) for p in sorted(RUNS.glob("run-*.json"))]


def calibration_prompts(record: dict) -> set[int]:
    """Prompt lengths of every batch the builds were fitted to: the plain server's (step_fit's
    lone prompts by the record's observation names, its decode and burst batches), the lone
    requests, the closed-loop decode batches and the open-loop ramp (as the prediction records
    them)."""
    names = [o["name"] for o in record["calibration"]["observations"]]
    lone = {int(m.group(1)) for n in names if (m := re.match(r"lone(\d+) ", n))}
    if not lone:
        raise AssertionError(f"no plain-server lone prompts among {names}")
    plain = lone | {step_fit.DECODE_PROMPT, step_fit.BLOCKER_LEN, step_fit.BURST_LEN}
    cal = record["prediction"]["calibration"]
    parts = ("lone_requests", "closed_loop_decode_batches", "open_loop_ramp")
    return plain | {n for part in parts for n in cal[part]["prompt_tokens"]}


def problems(record: dict) -> list[str]:
    """What is wrong with one run record (empty: nothing)."""
    out = []
    if not P.verify(record):
        return ["the frozen prediction does not hash to the run's sha256"]
    if not P.judged_as_frozen(record):
        out.append("the run judged another prediction than the frozen one")
    frozen = json.loads(Path(record["preregistration"]["prediction_file"]).read_text())
    if [m["x"] for m in record["measured"]] != frozen["rates"]:
        out.append("the measured rates are not the frozen ones")
    predicted = frozen["predicted_by_model"][frozen["primary_build"]]
    again = compare(predicted, record["measured"], frozen["sla_ttft_p95_s"])
    if again["knee_rate_err"] != record["summary"]["knee_rate_err"]:
        out.append(
            f"knee error {record['summary']['knee_rate_err']} is not the frozen "
            f"prediction's against the measured points ({again['knee_rate_err']})"
        )
    order = P.written_before_sweep(record)
    fine = "first_request_at" not in record and order is None  # a run stamped to the second
    if order is not True and not fine:
        out.append(f"prediction written {record['preregistration']['written_at']}, not before "
                   f"the sweep's first request ({record.get('first_request_at')})")  # fmt: skip
    slas = {frozen["sla_ttft_p95_s"], record["comparison"]["slo_ttft_p95_s"]}
    if slas != {V.SLA_TTFT_P95_S}:
        out.append(f"SLA {sorted(slas)} is not the fixed {V.SLA_TTFT_P95_S} s")
    sweep = frozen["workload"]["input_len"]["value"]
    if sweep in calibration_prompts(record):
        out.append(f"the sweep's {sweep}-token prompts are among the calibration's")
    return out


def test_every_committed_run_holds_its_preregistration():
    runs = _runs()
    assert len(runs) >= 5, [n for n, _ in runs]
    for name, record in runs:
        assert problems(record) == [], name
        # the 2026-12-03 runs: both stamps to the second and equal (see the module docstring)
        if "first_request_at" not in record:
            pre = record["preregistration"]["written_at"]
            assert P.written_before_sweep(record) is None and pre == record["sweep_started_at"]


def test_the_headline_is_collected_from_these_runs_and_diffs_the_lab():
    headline = json.loads(SUMMARY.read_text())
    got = P.collect(RUNS)
    assert headline["runs"] == got["runs"] and headline["of"] == got["of"]
    assert headline["median_knee_rate_err"] == got["median_knee_rate_err"]
    assert "lab" in V.CODE_PATHS and headline["code_paths"] == list(V.CODE_PATHS)
    assert all(r["prediction_intact"] for r in got["runs"])


def _tampered(record: dict, change) -> dict:
    out = copy.deepcopy(record)
    change(out)
    return out


def test_a_tampered_run_fails_each_check(tmp_path):
    _, record = _runs()[0]
    frozen = Path(record["preregistration"]["prediction_file"])
    edited = tmp_path / frozen.name
    text = frozen.read_bytes()
    assert b'"sla_ttft_p95_s": 1.0' in text
    edited.write_bytes(text.replace(b'"sla_ttft_p95_s": 1.0', b'"sla_ttft_p95_s": 2.0'))

    def repoint(r):
        r["preregistration"]["prediction_file"] = str(edited)

    def other_sla(r):  # a run judged at another SLA, its prediction frozen and judged alike
        import hashlib

        r["preregistration"]["prediction_file"] = str(edited)
        r["preregistration"]["prediction_sha256"] = hashlib.sha256(edited.read_bytes()).hexdigest()
        r["prediction"] = json.loads(edited.read_text())

    def later(r):  # a new-style run whose first request went before the prediction was written
        r["preregistration"]["written_at"] = "2026-12-06T06:00:00.500000+00:00"
        r["first_request_at"] = "2026-12-06T06:00:00.400000+00:00"

    def knee(r):
        r["summary"]["knee_rate_err"] = 0.1

    def calibrated_on_the_sweep(r):
        r["prediction"]["calibration"]["open_loop_ramp"]["prompt_tokens"].append(256)

    cases = [
        (repoint, "does not hash"),
        (other_sla, "is not the fixed 1.0 s"),
        (knee, "is not the frozen prediction's"),
        (later, "not before the sweep's first request"),
        (calibrated_on_the_sweep, "256-token prompts are among the calibration's"),
    ]
    for change, why in cases:
        found = problems(_tampered(record, change))
        assert any(why in p for p in found), (why, found)
    same_second = _tampered(record, lambda r: r.update(first_request_at=r["sweep_started_at"]))
    assert any("not before" in p for p in problems(same_second))  # new runs must prove it
