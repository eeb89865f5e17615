"""The PD decode side's live calibration without servers (pd_live.py): the ramp steps through
its fractions of the capacity; token times of hand-placed requests give the rows and contexts
they imply; and a simulated PD pair with a known decode step, replaying the ramp, gives that
step back from nothing but its clients' token times."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sglang_mx.measure.metrics import RequestResult
from sglang_mx.plan.stepcost import Work
from sglang_mx_lab.planner import pd_live as L
from sglang_mx_lab.planner import pd_model as M
from test_plan_pd_decode import HANDOFF
from test_plan_validate_pd import CAL, SCHED

DECODE = dataclasses.replace(CAL.cost, base_s=0.021, per_decode_s=0.0027, per_decode_key_s=4e-6)


def test_ramp_steps_through_its_fractions_of_the_capacity():
    cap = L.capacity(DECODE, 270)
    growth = DECODE([Work(decode=[270] * 2)]).seconds - DECODE([Work(decode=[270])]).seconds
    assert cap == pytest.approx(1 / (L.OUT * growth))
    trace = L.ramp_trace(cap)
    arrivals = np.array([r.arrival_s for r in trace.requests])
    assert np.all(np.diff(arrivals) > 0)
    t0 = 0.0
    for frac, seconds in L.RAMP:
        n = np.count_nonzero((arrivals >= t0) & (arrivals < t0 + seconds))
        expected = frac * cap * seconds
        assert abs(n - expected) < 4 * np.sqrt(expected) + 1, (frac, n, expected)
        t0 += seconds
    assert {r.input_len for r in trace.requests} == set(L.PROMPTS)
    assert {r.output_len for r in trace.requests} == {L.OUT}
    assert len({s for r in trace.requests for s, _ in r.segments}) == len(trace.requests)


def test_samples_count_the_rows_and_contexts_decoding_at_each_gap():
    # a decodes 0.1 .. 1.1 s, b 0.5 .. 1.5 s, c failed: every gap of b past SKIP has a decoding
    a = RequestResult("a", start=0.0, ttft=0.1, itl=[0.1] * 10)
    b = RequestResult("b", start=0.4, ttft=0.1, itl=[0.1] * 10)
    c = RequestResult("c", start=0.0, ttft=0.1, itl=[0.1] * 10, error="boom")
    got = L.samples([a, b, c], {"a": 64, "b": 448, "c": 1000})
    assert len(got) == 2 * (10 - L.SKIP)
    # a's gap 0.3 .. 0.4: only a decodes, 64 + 3 tokens so far
    assert got[0] == pytest.approx((1, 67.0, 0.1))
    # a's gap 0.6 .. 0.7 (mid 0.65): b holds 448 + 2 tokens, a 64 + 6
    assert got[5 - L.SKIP] == pytest.approx((2, (70 + 450) / 2, 0.1))
    # two decode while 0.5 <= mid < 1.1: a's gaps at mids 0.55 .. 1.05, b's at 0.75 .. 1.05
    assert [s[0] for s in got].count(2) == 6 + 4
    assert got[-1] == pytest.approx((1, 448 + 10, 0.1))  # b alone at 1.45


def test_a_known_decode_step_comes_back_from_simulated_client_times():
    model = M.PdModel("fake", SCHED, SCHED, CAL.cost, DECODE, CAL.frontend_s, HANDOFF)
    trace = L.ramp_trace(L.capacity(DECODE, 270))
    results = model.run(trace).request_results(CAL.frontend_s)
    prompt_of = {r.id: r.input_len for r in trace.requests}
    pts = L.points(L.samples(results, prompt_of))
    assert len(pts) >= 4 and max(p.rows for p in pts) > 20
    cost, record = L.fit(pts, CAL.cost)
    # the simulated step at the rows and contexts the ramp ran, within 10%
    for p in pts:
        true = DECODE([Work(decode=[int(p.context)] * round(p.rows))]).seconds
        fitted = cost([Work(decode=[int(p.context)] * round(p.rows))]).seconds
        assert fitted == pytest.approx(true, rel=0.1), p
    assert cost.per_prefill_token_s == CAL.cost.per_prefill_token_s
    assert len(record["points"]) == len(pts)


def test_a_doubled_decode_step_is_seen_as_doubled():
    slow = M.scaled(DECODE, 2.0)
    fits = []
    for cost in (DECODE, slow):
        model = M.PdModel("fake", SCHED, SCHED, CAL.cost, cost, CAL.frontend_s, HANDOFF)
        trace = L.ramp_trace(L.capacity(DECODE, 270) / 2)
        results = model.run(trace).request_results(CAL.frontend_s)
        pts = L.points(L.samples(results, {r.id: r.input_len for r in trace.requests}))
        fits.append(L.fit(pts, CAL.cost)[0]([Work(decode=[300] * 8)]).seconds)
    assert fits[1] / fits[0] == pytest.approx(2.0, rel=0.15)


def test_too_few_bins_is_refused_by_name():
    with pytest.raises(RuntimeError, match="row bins"):
        L.fit([L.LivePoint(1, 64, 0.02, 30)], CAL.cost)


def test_the_exponential_lag_draw_has_mean_one_and_is_fixed_by_the_request():
    class R:
        def __init__(self, i):
            self.id = f"req-{i}"

    draws = [M.exponential_draw(R(i)) for i in range(4000)]
    assert np.mean(draws) == pytest.approx(1.0, abs=0.06)
    assert np.median(draws) == pytest.approx(np.log(2), abs=0.05)
    assert M.exponential_draw(R(7)) == M.exponential_draw(R(7))


def _fake(lag: float, shape: str) -> M.PdModel:
    return M.PdModel("fake", SCHED, SCHED, CAL.cost, DECODE, CAL.frontend_s, HANDOFF,
                     first_token_lag=lag, lag_shape=shape)  # fmt: skip


def test_a_held_back_first_token_holds_back_the_stream():
    trace = L.ramp_trace(L.capacity(DECODE, 270))
    for r in _fake(2.0, "exponential").run(trace).request_results(CAL.frontend_s):
        assert all(x >= 0 for x in r.itl), r.request_id
        assert r.e2e >= r.ttft + sum(r.itl) - 1e-9


@pytest.mark.parametrize(("lag", "shape"), [(0.5, "constant"), (1.5, "exponential")])
def test_the_tail_fit_gives_back_a_known_lag_and_shape(lag, shape):
    trace = L.ramp_trace(L.capacity(DECODE, 270))
    results = _fake(lag, shape).run(trace).request_results(CAL.frontend_s)
    measured = L.segment_ttfts(trace, results)
    assert [m["fraction"] for m in measured] == [f for f, _ in L.RAMP]
    got_lag, got_shape, record = L.fit_tail(_fake, trace, measured)
    assert (got_lag, got_shape) == (lag, shape)
    assert record["best"]["sq_rel_err"] == pytest.approx(0.0, abs=1e-12)
