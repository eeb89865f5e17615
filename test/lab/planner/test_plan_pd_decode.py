"""The PD-calibrated build without servers (pd_decode.py, pd_model.pd_calibrated): decode
batches of a known step line give that line back; a simulated PD pair with a known decode cost,
handoff and first-token lag gives back the handoff and the lag; the lag delays only a joining
request's first token, by that share of the step it joins; and every simulated PD request
passes its stages in order."""

from __future__ import annotations

import dataclasses

import pytest
from sglang_mx.measure.sweep import sweep_specs
from sglang_mx.measure.tracegen import generate
from sglang_mx.plan.sim import build_groups, simulate
from sglang_mx.plan.stepcost import Work
from sglang_mx_lab.planner import pd_decode as D
from sglang_mx_lab.planner import pd_model as M
from sglang_mx_lab.planner import validate_pd_cpu as V
from sglang_mx_lab.planner.step_fit import lone_trace
from test_plan_validate_pd import CAL, SCHED, TRUE_HANDOFF, _stats

DECODE = dataclasses.replace(CAL.cost, base_s=0.021, per_decode_s=0.0027, per_decode_key_s=4e-6)
# fitted without the server's transfer latency, the whole handoff holds the lane
HANDOFF = dataclasses.replace(TRUE_HANDOFF, serial_latency_s=0.012, serial_per_token_s=3e-6)


def _fake(lag: float, k_p: float = 1.0) -> M.PdModel:
    return M.PdModel("fake", SCHED, SCHED, M.scaled(CAL.cost, k_p), DECODE, CAL.frontend_s,
                     HANDOFF, first_token_lag=lag)  # fmt: skip


def test_decode_fit_recovers_a_known_step_line():
    points = [
        D.DecodePoint(
            b, p, DECODE([Work(decode=[int(D.DecodePoint(b, p, 0).context)] * b)]).seconds
        )
        for p in D.PROMPTS
        for b in D.BATCHES
    ]
    cost, record = D.fit(points, CAL.cost)
    assert cost.base_s == pytest.approx(0.021, rel=1e-6)
    assert cost.per_decode_s == pytest.approx(0.0027, rel=1e-6)
    assert cost.per_decode_key_s == pytest.approx(4e-6, rel=1e-5)
    # the prefill terms stay the calibration's: the decode side never prefills
    assert cost.per_prefill_token_s == CAL.cost.per_prefill_token_s
    assert all(p["fitted_s"] == pytest.approx(p["itl_s"], rel=1e-6) for p in record["points"])


def _lone_pd(fake: M.PdModel) -> dict:
    out = {}
    for n in V.LONE_LENS:
        res = fake.run(lone_trace(f"t{n}", n, 3)).request_results(CAL.frontend_s)
        # SGLang's prefill_forward stage of a lone PD prefill: that side's step
        out[n] = _stats(res, n, M._prefill_step(fake.prefill_cost, n))
    return out


@pytest.mark.parametrize(("lag", "k_p"), [(0.0, 1.0), (0.7, 0.6), (1.0, 1.0)])
def test_pd_calibrated_recovers_the_handoff_and_the_first_token_lag(lag, k_p):
    fake = _fake(lag, k_p)
    pd = _lone_pd(fake)
    busy = [
        D.BusyPoint(
            rows, D._arrival_ttft(fake.run(D.busy_trace(rows)).request_results(fake.frontend_s))
        )
        for rows in D.BUSY_ROWS
    ]

    def build(x):
        return M.pd_calibrated((SCHED, SCHED), CAL, pd, DECODE, 4872, [], x)

    got, record = D.fit_lag(build, busy)
    assert got == pytest.approx(lag)
    assert record["grid"][0]["lag"] == 0.0 and len(record["grid"]) == len(D.LAGS)
    m = build(got)
    assert m.factors[0] == pytest.approx(k_p, rel=1e-9)
    assert m.handoff.latency_s == pytest.approx(TRUE_HANDOFF.latency_s, abs=2e-5)
    assert m.handoff.per_token_s == pytest.approx(TRUE_HANDOFF.per_token_s, abs=1e-7)
    # a build that ignores the lag puts it into the handoff instead (when there is one)
    if lag:
        assert build(0.0).handoff.latency_s > TRUE_HANDOFF.latency_s + 0.005


def test_the_lag_delays_only_a_joining_requests_first_token():
    trace = generate(sweep_specs(V.pd_workload(12, 128, 6), "rate", [3.0])[0])
    plain = _fake(0.0).run(trace)
    lagged = _fake(1.0).run(trace)
    for a, b in zip(plain.requests, lagged.requests, strict=True):
        assert b.first_token > a.first_token
        # the first token waits one whole step of the batch it joins; every later token is
        # where it was
        assert b.token_times[1:] == a.token_times[1:]
        assert b.first_token <= b.token_times[1]
    # a server that is not a PD decode side has no joins: the lag changes nothing there
    groups = lambda: build_groups(SCHED, CAL.cost)  # noqa: E731
    one = simulate(trace, groups(), first_token_lag=0.0)
    two = simulate(trace, groups(), first_token_lag=1.0)
    assert [r.first_token for r in one.requests] == [r.first_token for r in two.requests]


def test_pd_requests_pass_their_stages_in_order():
    trace = generate(sweep_specs(V.pd_workload(16, 128, 6), "rate", [4.0])[0])
    res = _fake(0.5).run(trace)
    for r in res.requests:
        assert r.start <= r.bootstrapped <= r.kv_sent <= r.kv_landed <= r.first_token
        # the KV moves for the handoff's time, at least (longer when the lane is busy)
        assert r.kv_landed - r.kv_sent >= TRUE_HANDOFF(r) - 1e-12
