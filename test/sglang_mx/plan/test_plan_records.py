"""A plan is typed records (plan/records.py): plan.json is Plan.to_dict() and reads back key for
key, the committed plan reads into the records with its figures unchanged, the best point is the
one the SLA admits, and a name the records lack is refused by name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from sglang_mx.cli.main import main
from sglang_mx.measure.summary import RunSummary
from sglang_mx.measure.sweep import SweepPoint
from sglang_mx.plan.records import LayoutSweep, Plan, PlanPoint, best_at_sla
from sglang_mx.plan.report import markdown

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "docs/results/planner-glm52-mi355x"


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plan")
    argv = ["plan", "--model", "glm-5.2", "--hardware", "MI355X", "--gpus", "8"]
    argv += ["--layout", "tp8,tp4xdp2", "--workload", "4k-0.1k-60", "--rates", "1,64,512"]
    argv += ["--num-requests", "16", "--slo-ttft", "0.3", "-o", str(out), "--no-plots"]
    assert main(argv) == 0
    return out


def test_plan_json_is_the_record_and_reads_back_key_for_key(planned):
    text = (planned / "plan.json").read_text()
    result = json.loads(text)
    plan = Plan.from_dict(result)
    assert [sw.layout for sw in plan.sweeps] == ["tp8", "tp4xdp2"]
    assert all(isinstance(p, SweepPoint) for sw in plan.sweeps for p in sw.points)
    back = plan.to_dict()
    assert back == result
    assert json.dumps(back, indent=1, default=str) == text  # same keys, same order
    assert markdown(plan) == (planned / "plan.md").read_text() == markdown(result)


def _best_by_hand(result: dict, slo_s: float):
    admitted = [
        (sw["layout"], p)
        for sw in result["sweeps"]
        for p in sw["points"]
        if p["summary"]["errors"] == 0 and p["summary"]["ttft_s"]["p95"] <= slo_s
    ]
    if not admitted:
        return None
    return max(admitted, key=lambda lp: lp[1]["summary"]["goodput_output_tok_s"])


def test_best_is_the_most_goodput_the_sla_admits(planned):
    result = json.loads((planned / "plan.json").read_text())
    plan = Plan.from_dict(result)
    layout, top = _best_by_hand(result, 0.3)
    assert (plan.best.layout, plan.best.x) == (layout, top["x"])
    assert plan.best.output_tokens_per_usd == top["summary"]["cost"]["output_tokens_per_usd"]
    # A tighter SLA over the same points: the point with the most goodput misses it on TTFT p95
    # (goodput was counted at 0.3 s), so only the SLA's own test leaves it out.
    every = _best_by_hand(result, float("inf"))
    layout, top = _best_by_hand(result, 0.2)
    assert (layout, top["x"]) != (every[0], every[1]["x"]), "the points no longer test the SLA"
    best = best_at_sla([dataclasses.replace(sw, slo=0.2) for sw in plan.sweeps])
    assert (best.layout, best.x) == (layout, top["x"])
    assert best_at_sla([dataclasses.replace(sw, slo=0.01) for sw in plan.sweeps]) is None


def test_the_committed_plan_reads_with_its_figures_unchanged():
    result = json.loads((COMMITTED / "plan.json").read_text())
    plan = Plan.from_dict(result)
    for sw, old in zip(plan.sweeps, result["sweeps"], strict=True):
        assert sw.layout == old["layout"] and sw.knee_rate == old["knee_rate"]
        assert sw.knee.x == old["knee"]["x"]
        for p, q in zip(sw.to_dict()["points"], old["points"], strict=True):
            assert p["x"] == q["x"]
            assert {k: p["summary"][k] for k in q["summary"]} == q["summary"]
    assert plan.best.to_dict() == result["best"]
    # Every table row of the committed plan.md is what the records render now.
    rows = [ln for ln in (COMMITTED / "plan.md").read_text().splitlines() if ln.startswith("| ")]
    assert rows and set(rows) <= set(markdown(plan).splitlines())


def test_a_name_the_records_lack_is_refused_by_name(planned):
    result = json.loads((planned / "plan.json").read_text())
    with pytest.raises(TypeError, match="bogus"):
        Plan.from_dict({**result, "bogus": 1})
    with pytest.raises(TypeError, match="knee_rte"):
        LayoutSweep.from_dict({**result["sweeps"][0], "knee_rte": 1.0})
    measured = SweepPoint(1.0, RunSummary.from_dict(result["sweeps"][0]["points"][0]["summary"]))
    bench_only = {k: v for k, v in measured.summary.to_dict().items() if k not in ("cost", "steps")}
    bare = SweepPoint(1.0, RunSummary.from_dict(bench_only))
    assert PlanPoint.of(measured).steps > 0
    with pytest.raises(KeyError, match=r"cost.*steps"):
        PlanPoint.of(bare)
