"""Percentiles and run summaries on synthetic timings."""

from __future__ import annotations

import math
import random

import pytest
from sglang_mx.measure.metrics import RequestResult, Slo, percentile, summarize


def test_percentile_matches_hand_computed_linear_interpolation():
    values = [15.0, 20.0, 35.0, 40.0, 50.0]
    # rank = (n-1) q/100: p0 -> 0, p50 -> 2, p40 -> 1.6 -> 20 + 0.6*15, p95 -> 3.8 -> 40 + 0.8*10
    assert percentile(values, 0) == 15.0
    assert percentile(values, 50) == 35.0
    assert percentile(values, 40) == pytest.approx(29.0)
    assert percentile(values, 95) == pytest.approx(48.0)
    assert percentile(values, 100) == 50.0
    assert percentile(list(reversed(values)), 95) == pytest.approx(48.0)  # order-free
    assert math.isnan(percentile([], 50))
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_percentile_agrees_with_numpy_on_random_samples():
    np = pytest.importorskip("numpy")
    rng = random.Random(1)
    for n in (2, 3, 10, 101):
        xs = [rng.expovariate(3.0) for _ in range(n)]
        for q in (1, 50, 90, 95, 99):
            assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-12)


def _result(i: int, start: float, ttft: float, n_out: int, tpot: float, **kw) -> RequestResult:
    itl = [tpot] * (n_out - 1)
    return RequestResult(
        f"r{i}",
        start=start,
        ttft=ttft,
        e2e=ttft + sum(itl),
        itl=itl,
        prompt_tokens=100,
        completion_tokens=n_out,
        **kw,
    )


def test_summary_throughput_hit_rate_goodput():
    rs = [
        _result(0, 0.0, 1.0, 11, 0.1, cached_tokens=60, expected_cached=60),  # ends at 2.0
        _result(1, 1.0, 2.0, 11, 0.1, cached_tokens=50, expected_cached=60),  # ends at 4.0
        _result(2, 2.0, 6.0, 11, 0.2, cached_tokens=70, expected_cached=60),  # ends at 10.0
        RequestResult("r3", start=3.0, error="HTTP 500"),
    ]
    s = summarize(rs, Slo(ttft_p95_s=5.0, ttft_s=5.0))
    assert s.completed == 3 and s.errors == 1 and s.success_rate == 0.75
    assert s.duration_s == pytest.approx(10.0)
    assert s.output_tokens == 33 and s.input_tokens == 300
    assert s.output_tok_s == pytest.approx(3.3)
    assert s.total_tok_s == pytest.approx(33.3)
    assert s.hit_rate == pytest.approx(180 / 300)
    assert s.expected_hit_rate == pytest.approx(0.6)
    assert s.ttft_s.p50 == pytest.approx(2.0)
    assert s.ttft_s.p95 == pytest.approx(2.0 + 0.9 * 4.0)
    assert s.tpot_s.mean == pytest.approx((0.1 + 0.1 + 0.2) / 3)
    assert s.itl_s.p50 == pytest.approx(0.1)
    # two of three completed requests meet TTFT <= 5 s
    assert s.goodput_req_s == pytest.approx(0.2)
    assert s.goodput_output_tok_s == pytest.approx(2.2)
    assert s.slo_met is False  # an error fails the SLO regardless of latency
