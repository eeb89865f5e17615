"""The calibration's equations against the simulator: measurements simulated with a known step
cost (CPU overlap loop on) must fit back to that cost, and the equations are checked by hand."""

from __future__ import annotations

import pytest
from plan_support import cfg
from sglang_mx.plan.sim import build_groups, simulate
from sglang_mx.plan.stepcost import LinearStepCost, Work
from sglang_mx_lab.planner import step_fit as C

TRUE = {
    "frontend": 0.006,
    "base": 0.03,
    "prefill_base": 0.01,
    "per_request": 0.0005,
    "per_token": 0.0012,
    "per_pair": 1e-5,
}


def cost_of(t: dict) -> LinearStepCost:
    return C.cost_from_terms(t)


def simulated(t: dict) -> dict:
    out = {}
    for name, tr in C.traces().items():
        res = simulate(tr, build_groups(cfg(sync_forward=True), cost_of(t)))
        out[name] = res.request_results(t["frontend"])
    return out


def test_batched_prefill_cost_by_hand():
    c = cost_of(TRUE)
    # two 64-token prompts in one step, one over a 64-token cached prefix:
    # base + prefill_base + 2 pieces + 128 tokens + pairs 64 x 64 + 64 x 128
    w = Work(prefill=[(0, 64), (64, 64)])
    want = 0.03 + 0.01 + 2 * 0.0005 + 128 * 0.0012 + (64 * 64 + 64 * 128) * 1e-5
    assert c([w]).seconds == pytest.approx(want)
    # decode rows: base + rows x (request + token) + context pairs
    assert c([Work(decode=[100, 50])]).seconds == pytest.approx(0.03 + 2 * 0.0017 + 150 * 1e-5)


def test_lone_prompt_ttft_includes_the_next_step():
    res = simulated(TRUE)
    (obs,) = [o for o in C.observations(res) if o.name == "lone64 TTFT"]
    p = 0.03 + 0.01 + 0.0005 + 64 * 0.0012 + 64 * 64 * 1e-5
    d = 0.03 + 0.0017 + 65 * 1e-5
    assert obs.measured == pytest.approx(0.006 + p + d)  # overlap loop: sent after D
    fitted = sum(f * v for f, v in zip(obs.features, TRUE.values(), strict=True))
    assert fitted == pytest.approx(obs.measured)


def test_fit_recovers_the_simulated_cost():
    cal = C.fit(C.observations(simulated(TRUE)))
    for k, v in TRUE.items():
        assert cal.terms[k] == pytest.approx(v, rel=1e-6), k
    assert cal.frontend_s == pytest.approx(TRUE["frontend"], rel=1e-6)
