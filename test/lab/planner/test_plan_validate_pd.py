"""validate_pd_cpu's model builds without servers (pd_model.py): from simulated lone requests of
a plain server and of a PD pair with known step costs and handoff, both builds recover that
handoff and the side speeds; the predicted knee is where the simulated PD TTFT p95 crosses the
SLA; the judge passes a measured sweep within 25% and fails one that is not; SGLang's metric
text is read as SGLang writes it."""

from __future__ import annotations

import math
import types

import pytest
from plan_support import cfg
from sglang_mx.plan.sim import build_groups, simulate
from sglang_mx_lab.planner import pd_model as M
from sglang_mx_lab.planner import validate_pd_cpu as V
from sglang_mx_lab.planner.handoff import Handoff, HandoffSample, fit_handoff
from sglang_mx_lab.planner.pd_lone import PREFILL_FORWARD, TRANSFER, LoneStats, histogram_totals
from sglang_mx_lab.planner.step_fit import lone_trace
from sglang_mx_lab.planner.validate_cpu import compare
from test_plan_step_fit import TRUE, cost_of

TINY = "python/sglang_mx/assets/tiny-glm5-quark"
SCHED = cfg(sync_forward=True, page_size=64, schedule_policy="fcfs")
CAL = types.SimpleNamespace(cost=cost_of(TRUE), frontend_s=TRUE["frontend"])
TRUE_HANDOFF = Handoff(latency_s=0.012, per_token_s=3e-6, bytes_per_token=4872)


def _fake_pd(k_p: float = 1.0, k_d: float = 1.0, handoff: Handoff = TRUE_HANDOFF) -> M.PdModel:
    """A PD pair standing in for the live one: sides k_p / k_d times the plain server's cost."""
    return M.PdModel("fake", SCHED, SCHED, M.scaled(CAL.cost, k_p), M.scaled(CAL.cost, k_d),
                     CAL.frontend_s, handoff, (k_p, k_d))  # fmt: skip


def _stats(results, n: int, prefill_forward: float) -> LoneStats:
    return LoneStats(n, [r.ttft for r in results], [x for r in results for x in r.itl],
                     prefill_forward)  # fmt: skip


def _lone(fake: M.PdModel) -> tuple[dict, dict]:
    """Lone requests at V.LONE_LENS on the plain server and through `fake`, as LoneStats (the
    prefill_forward stage as SGLang would report it: that side's prefill step)."""
    plain, pd = {}, {}
    for n in V.LONE_LENS:
        tr = lone_trace(f"t{n}", n, 3)
        res = simulate(tr, build_groups(SCHED, CAL.cost)).request_results(CAL.frontend_s)
        plain[n] = _stats(res, n, M._prefill_step(CAL.cost, n))
        res = simulate(tr, fake.groups(), handoff_s=fake.handoff).request_results(CAL.frontend_s)
        pd[n] = _stats(res, n, M._prefill_step(fake.prefill_cost, n))
    return plain, pd


def test_as_specified_recovers_the_handoff_when_sides_run_at_the_plain_speed():
    plain, pd = _lone(_fake_pd())
    m = M.as_specified((SCHED, SCHED), CAL, plain, pd, 4872, [])
    assert m.handoff.latency_s == pytest.approx(0.012, abs=1e-9)
    assert m.handoff.per_token_s == pytest.approx(3e-6, rel=1e-6)
    assert m.handoff.bytes_per_s == pytest.approx(4872 / 3e-6)
    # the plain server's first decode step is taken out of its TTFT (the CPU overlap lag)
    assert all(s.plain_lag_s > 0.01 for s in m.handoff.samples)


def test_side_speeds_recover_slower_sides_and_their_handoff():
    fake = _fake_pd(k_p=2.0, k_d=1.5)
    plain, pd = _lone(fake)
    m = M.with_side_speeds((SCHED, SCHED), CAL, plain, pd, 4872, [])
    # prefill from the stage means exactly; decode from median ITLs (which gap is the median
    # moves it by < 0.1%)
    assert m.factors == pytest.approx((2.0, 1.5), rel=1e-3)
    assert m.handoff.latency_s == pytest.approx(0.012, abs=1e-9)
    assert m.handoff.per_token_s == pytest.approx(3e-6, rel=1e-6)
    spec = V.pd_workload(16, 128, 8)
    for got, want in zip(m.predict(spec, [1.0, 3.0]), fake.predict(spec, [1.0, 3.0]), strict=True):
        assert got["summary"]["ttft_s"]["p95"] == pytest.approx(
            want["summary"]["ttft_s"]["p95"],
            rel=0.03,  # near saturation 0.03% in k_d shows
        )
    # the build that assumes plain-speed sides puts the slower prefill into a delay instead
    assert M.as_specified((SCHED, SCHED), CAL, plain, pd, 4872, []).handoff.per_token_s > 1e-4


def test_fit_keeps_both_terms_non_negative():
    # handoff 0.2 - (0.2 - 0.03) = 0.03 at 64 tokens, 0.499 - 0.47 = 0.029 at 448: no slope
    noisy = [HandoffSample(64, 0.2, 0.2, 0.03), HandoffSample(448, 0.499, 0.5, 0.03)]
    fit = fit_handoff(noisy, 1000.0)
    assert fit.per_token_s == 0.0 and fit.latency_s == pytest.approx(0.0295)
    with pytest.raises(ValueError):
        fit_handoff([], 1.0)


def test_serial_part_comes_from_the_servers_transfer_latency():
    samples = [HandoffSample(64, 0.30, 0.10, 0.03), HandoffSample(448, 0.60, 0.20, 0.03)]
    # handoff 0.23 at 64 and 0.43 at 448; the server's own transfer 0.05 and 0.126 s
    fit = fit_handoff(samples, 4872.0, [(64, 0.05), (448, 0.126)])
    assert fit.per_token_s == pytest.approx(0.2 / 384)
    assert fit.serial_per_token_s == pytest.approx(0.076 / 384)
    assert fit.serial_latency_s == pytest.approx(0.05 - 64 * 0.076 / 384)
    r = types.SimpleNamespace(input_len=448)
    assert fit.serial_s(r) == pytest.approx(0.126) and fit(r) == pytest.approx(0.43)
    whole = fit_handoff(samples, 4872.0)  # no server figure: all of it holds the lane
    assert whole.serial_s(r) == pytest.approx(whole(r))


def test_tiny_glm5_ships_its_latent_and_index_keys():
    # 4 layers x (512 + 64) latent values, 2 index layers (indexer_types) x (128 FP8 + 4 B)
    assert M.kv_bytes_per_token(TINY, {"kv_cache_dtype": "auto", "dtype": "bfloat16"}) == (
        4 * 576 * 2 + 2 * 132
    )
    assert M.kv_bytes_per_token(TINY, {"kv_cache_dtype": "fp8_e4m3"}) == 4 * 576 + 2 * 132


def test_knee_is_judged_on_the_measured_sweep():
    model = _fake_pd(handoff=Handoff(0.02, 2e-6, 4872))
    spec = V.pd_workload(24, 128, 8)
    slo = V.SLA_TTFT_P95_S  # fixed from the workload, not from the model
    knee = model.knee_at(spec, slo, V.LOW_RATE)
    rates = [round(knee * f, 3) for f in V.RATE_FRACTIONS]
    pred = model.predict(spec, rates)
    assert pred[3]["summary"]["ttft_s"]["p95"] <= slo < pred[-1]["summary"]["ttft_s"]["p95"]
    close = compare(pred, _fake_pd(1.05, 1.05, model.handoff).predict(spec, rates), slo)
    assert close["knee_reached"]["meas"] and close["targets"]["knee_within_25pct"]
    # 30% slower sides: the measured knee comes well before the predicted one (or the first
    # rate already misses the SLA), and the target fails
    far = compare(pred, _fake_pd(1.3, 1.3, model.handoff).predict(spec, rates), slo)
    assert not far["targets"]["knee_within_25pct"], far["knee_rate_err"]
    assert math.isnan(far["knee_rate_meas"]) or far["knee_rate_err"] > 0.25


def test_stage_and_transfer_means_read_from_prometheus_text():
    text = "\n".join([
        "# HELP sglang:kv_transfer_latency_ms Histogram of KV cache transfer latency in ms.",
        'sglang:kv_transfer_latency_ms_bucket{le="1.0",model_name="m"} 0.0',
        'sglang:kv_transfer_latency_ms_sum{model_name="m"} 120.5',
        'sglang:kv_transfer_latency_ms_count{model_name="m"} 3.0',
        'sglang:per_stage_req_latency_seconds_sum{model_name="m",stage="prefill_forward"} 0.9',
        'sglang:per_stage_req_latency_seconds_count{model_name="m",stage="prefill_forward"} 6.0',
        'sglang:per_stage_req_latency_seconds_sum{model_name="m",stage="prefill_bootstrap"} 1',
    ])  # fmt: skip
    totals = histogram_totals(text)
    assert totals[TRANSFER] == (120.5, 3.0)
    assert totals[PREFILL_FORWARD] == (0.9, 6.0)
    assert histogram_totals("") == {}
