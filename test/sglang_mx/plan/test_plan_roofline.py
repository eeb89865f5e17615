"""The roofline stays the limit line: with the 'ideal' profile and no link a decode step costs
exactly the roofline's decode step, and a plan never reports more throughput than the roofline
at any rate or layout."""

from __future__ import annotations

import pytest
from sglang_mx.capacity.hardware import get_hardware
from sglang_mx.capacity.modelspec import load_model
from sglang_mx.capacity.roofline import Precision, Workload, decode_step
from sglang_mx.capacity.workload import LengthDist, WorkloadSpec
from sglang_mx.measure.metrics import Slo
from sglang_mx.plan.efficiency import get_profile
from sglang_mx.plan.layouts import parse_plan_layout
from sglang_mx.plan.links import link_for
from sglang_mx.plan.planner import Deployment, plan_sweep
from sglang_mx.plan.stepcost import RooflineStepCost, Work

MODEL, HW = load_model("glm-5.2"), get_hardware("MI355X")


@pytest.mark.parametrize("layout", ["tp8", "tp8-dpattn8"])
def test_ideal_decode_step_is_the_roofline_step(layout):
    lay = parse_plan_layout(layout)
    w = Workload(4000, 200, 0.0)
    c = 64
    ctx = int(w.mean_decode_context)
    cost = RooflineStepCost(MODEL, HW, lay.engine, Precision(), get_profile("ideal"))
    per_rank = c // lay.ranks
    step = cost([Work(decode=[ctx] * per_rank) for _ in range(lay.ranks)])
    mem, comp = decode_step(MODEL, HW, lay.node, Precision(), w, c)
    assert step.hbm_s == pytest.approx(mem, rel=1e-6)
    assert step.compute_s == pytest.approx(comp, rel=0.02)  # lm_head per token on both sides
    assert step.seconds == pytest.approx(max(mem, comp), rel=0.02)


@pytest.mark.parametrize("profile", ["ideal", "production-assumed"])
@pytest.mark.parametrize("layout", ["tp8", "tp8-dpattn8", "tp4xdp2"])
def test_plan_never_above_the_roofline(layout, profile):
    spec = WorkloadSpec(
        input_len=LengthDist("fixed", 4000),
        output_len=LengthDist("fixed", 100),
        hit_rate=0.6,
        prefix_groups=4,
        num_requests=24,
    )
    link = None if profile == "ideal" else link_for("MI355X")
    dep = Deployment(MODEL, HW, parse_plan_layout(layout), Precision(), get_profile(profile), link)
    sweep = plan_sweep(dep, spec, "rate", [2.0, 50.0, 1000.0], Slo())
    roof = sweep.roofline
    for p in sweep.points:
        s = p.summary
        assert s.completed == 24
        assert s.output_tok_s <= roof["output_tok_s"]
        assert s.total_tok_s <= roof["total_tok_s"]


def test_efficiency_and_links_only_slow_a_step_down():
    lay = parse_plan_layout("tp8")
    work = [Work(prefill=[(2000, 2000)], decode=[5000] * 32)]
    ideal = RooflineStepCost(MODEL, HW, lay.engine, Precision(), get_profile("ideal"))(work)
    real = RooflineStepCost(
        MODEL, HW, lay.engine, Precision(), get_profile("production-assumed"), link_for("MI355X")
    )(work)
    assert real.seconds > ideal.seconds
    assert real.interconnect_s > 0 and ideal.interconnect_s == 0
