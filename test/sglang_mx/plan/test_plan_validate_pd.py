"""validate_pd_cpu without servers: the handoff fit recovers a known transfer from simulated lone
requests (plain server vs PD pair, the CPU overlap loop's lag included), the predicted knee is
where the simulated PD TTFT p95 crosses the SLA, and the judge passes a measured sweep whose
knee is within 25% and fails one that is not."""

from __future__ import annotations

import dataclasses
import math
import types

import pytest
from plan_support import cfg
from sglang_mx.bench.metrics import summarize
from sglang_mx.plan import validate_pd_cpu as V
from sglang_mx.plan.handoff import Handoff, HandoffSample, fit_handoff
from sglang_mx.plan.sim import build_groups, simulate
from sglang_mx.plan.validate_cpu import compare
from test_plan_calibrate import TRUE, cost_of

TINY = "python/sglang_mx/assets/tiny-glm5-quark"
SCHED = cfg(sync_forward=True, page_size=64, schedule_policy="fcfs")
CAL = types.SimpleNamespace(cost=cost_of(TRUE), frontend_s=TRUE["frontend"])


def _lone_ttft(groups, n: int, handoff=None) -> float:
    from sglang_mx.plan.calibrate import lone_trace

    res = simulate(lone_trace(f"t{n}", n, 3), groups, handoff_s=handoff)
    return summarize(res.request_results(CAL.frontend_s))["ttft_s"]["p50"]


def test_fit_recovers_the_handoff_from_lone_requests():
    true = Handoff(latency_s=0.012, per_token_s=3e-6, bytes_per_token=4872)
    plain = {n: _lone_ttft(build_groups(SCHED, CAL.cost), n) for n in V.LONE_LENS}
    pd = {n: _lone_ttft(V.pd_groups(SCHED, SCHED, CAL.cost), n, true) for n in V.LONE_LENS}
    fit = fit_handoff(V.handoff_samples(pd, plain, CAL.cost), 4872)
    assert fit.latency_s == pytest.approx(0.012, abs=1e-9)
    assert fit.per_token_s == pytest.approx(3e-6, rel=1e-6)
    assert fit.bytes_per_s == pytest.approx(4872 / 3e-6)
    # without the lag correction the plain server's first decode step would shrink the latency
    assert all(s.plain_lag_s > 0.01 for s in fit.samples)


def test_fit_keeps_both_terms_non_negative():
    # handoff 0.2 - (0.2 - 0.03) = 0.03 at 64 tokens, 0.499 - 0.47 = 0.029 at 448: no slope
    noisy = [HandoffSample(64, 0.2, 0.2, 0.03), HandoffSample(448, 0.499, 0.5, 0.03)]
    fit = fit_handoff(noisy, 1000.0)
    assert fit.per_token_s == 0.0 and fit.latency_s == pytest.approx(0.0295)
    with pytest.raises(ValueError):
        fit_handoff([], 1.0)


def test_tiny_glm5_ships_its_latent_and_index_keys():
    # 4 layers x (512 + 64) latent values, 2 index layers (indexer_types) x (128 FP8 + 4 B)
    assert V.kv_bytes_per_token(TINY, {"kv_cache_dtype": "auto", "dtype": "bfloat16"}) == (
        4 * 576 * 2 + 2 * 132
    )
    assert V.kv_bytes_per_token(TINY, {"kv_cache_dtype": "fp8_e4m3"}) == 4 * 576 + 2 * 132


def _sweep(spec, rates, slow: float, handoff: Handoff) -> list[dict]:
    """A fake upstream: the PD pair simulated with every step `slow` times the model's."""
    base = CAL.cost
    cost = dataclasses.replace(
        base,
        **{
            f.name: getattr(base, f.name) * slow
            for f in dataclasses.fields(base)
            if f.name.endswith("_s")
        },
    )
    return V.predict(
        spec,
        rates,
        (SCHED, SCHED),
        types.SimpleNamespace(cost=cost, frontend_s=CAL.frontend_s),
        handoff,
    )


def test_knee_is_judged_on_the_measured_sweep():
    handoff = Handoff(0.02, 2e-6, 4872)
    spec = V.workload(24, 8)
    slo, knee = V.predicted_knee(spec, (SCHED, SCHED), CAL, handoff)
    rates = [round(knee * f, 3) for f in V.RATE_FRACTIONS]
    pred = V.predict(spec, rates, (SCHED, SCHED), CAL, handoff)
    assert pred[3]["summary"]["ttft_s"]["p95"] <= slo < pred[-1]["summary"]["ttft_s"]["p95"]
    close = compare(pred, _sweep(spec, rates, 1.05, handoff), slo)
    assert close["knee_reached"]["meas"] and close["targets"]["knee_within_25pct"]
    # 30% slower steps: the measured TTFT p95 misses the SLA from the first rate on, so there
    # is no measured knee inside the sweep and the target fails
    far = compare(pred, _sweep(spec, rates, 1.3, handoff), slo)
    assert math.isnan(far["knee_rate_meas"]) and not far["targets"]["knee_within_25pct"]


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


def test_transfer_totals_read_from_prometheus_text():
    text = "\n".join([
        "# HELP sglang:kv_transfer_latency_ms Histogram of KV cache transfer latency in ms.",
        'sglang:kv_transfer_latency_ms_bucket{le="1.0",model_name="m"} 0.0',
        'sglang:kv_transfer_latency_ms_sum{model_name="m"} 120.5',
        'sglang:kv_transfer_latency_ms_count{model_name="m"} 3.0',
        'sglang:kv_transfer_speed_gb_s_sum{model_name="m"} 9.0',
    ])  # fmt: skip
    assert V.parse_transfer_totals(text) == (120.5, 3.0)
    assert V.parse_transfer_totals("") == (0.0, 0.0)
