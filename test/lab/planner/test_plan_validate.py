"""validate_cpu without a server: the predicted knee lies where the simulated TTFT p95 crosses
the SLA, and the comparison counts rates and targets as the issue states them."""

from __future__ import annotations

import json
import types

import pytest
from plan_support import cfg
from sglang_mx_lab.planner import validate_cpu as V
from test_plan_step_fit import TRUE, cost_of


def _pt(x, ttft50, ttft90, ttft95, itl50, itl90):
    return {
        "x": x,
        "summary": {
            "errors": 0,
            "ttft_s": {"p50": ttft50, "p90": ttft90, "p95": ttft95},
            "itl_s": {"p50": itl50, "p90": itl90},
        },
    }


def test_predicted_knee_is_where_ttft_p95_crosses_the_sla():
    cal = types.SimpleNamespace(cost=cost_of(TRUE), frontend_s=TRUE["frontend"])
    spec = V.workload(20, 8)
    sched = cfg(sync_forward=True, page_size=64, schedule_policy="fcfs")
    slo, knee = V.predicted_knee(spec, sched, cal)
    low = V.predict(spec, [V.LOW_RATE], sched, cal)[0]["summary"]["ttft_s"]["p50"]
    assert slo == pytest.approx(V.SLO_FACTOR * low)
    below, above = V.predict(spec, [knee * 0.8, knee * 1.5], sched, cal)
    assert below["summary"]["ttft_s"]["p95"] <= slo < above["summary"]["ttft_s"]["p95"]


def test_compare_counts_rates_below_the_measured_knee(tmp_path):
    pred = [_pt(r, 0.2 * r, 0.3 * r, 0.4 * r, 0.04, 0.08) for r in (1, 2, 3, 4, 5)]
    # measured: TTFT 10% high, ITL p90 2.5x at rate 1 (its -60% error fails p90 there only)
    meas = [_pt(r, 0.22 * r, 0.33 * r, 0.44 * r, 0.044, 0.2 if r == 1 else 0.088)
            for r in (1, 2, 3, 4, 5)]  # fmt: skip
    c = V.compare(pred, meas, slo_s=1.5)
    assert c["knee_reached"] == {"pred": True, "meas": True}
    assert c["knee_rate_pred"] == pytest.approx(3.75)  # 0.4 r = 1.5
    assert c["knee_rate_meas"] == pytest.approx(1.5 / 0.44)
    t = c["targets"]
    assert t["rates_below_knee"] == 3
    assert t["rates_p50_within_25pct"] == 3 and t["rates_p90_within_40pct"] == 2
    assert t["knee_within_25pct"] and not t["met"]
    result = {
        "comparison": c,
        "stamp": {"client_host": "test", "date": "2026-12-01"},
        "load_average": {"sweep_start": [0.0, 0.0, 0.0]},
    }
    V.plot(result, tmp_path / "v.png")
    assert (tmp_path / "v.png").stat().st_size > 0
    assert "knee_rate_err" in V.markdown(result)
    json.dumps(c)
