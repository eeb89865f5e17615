"""Cost arithmetic against hand-computed cases."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from sglang_mx.capacity.cost import PriceSheet, cost_report, usd_per_million


def test_inferencex_formula_public_mi355x_point():
    # $1.48 x 8 GPUs = $11.84/h; 2,626 tok/s x 3600 = 9,453,600 tok/h -> $1.25245/M
    assert usd_per_million(1.48, 8, 2626) == pytest.approx(11.84 / 9_453_600 * 1e6)
    assert usd_per_million(1.48, 8, 2626) == pytest.approx(1.252433, rel=1e-5)
    # B200: $1.95 x 8 = $15.60/h at 3,192 tok/s -> $1.35756/M
    assert usd_per_million(1.95, 8, 3192) == pytest.approx(1.357560, rel=1e-5)
    assert usd_per_million(1.0, 1, 0) == math.inf


def _rates(output_tok_s: float, total_tok_s: float, input_tok_s: float, hit_rate: float):
    """The figures cost_report reads off a run summary (RunSummary's names), goodput unknown."""
    return SimpleNamespace(output_tok_s=output_tok_s, total_tok_s=total_tok_s,
                           input_tok_s=input_tok_s, hit_rate=hit_rate,
                           goodput_output_tok_s=None, goodput_req_s=None)  # fmt: skip


def test_cost_report_per_gpu_totals_and_cache_read_pricing():
    summary = _rates(1000.0, 21000.0, 20000.0, 0.6)
    prices = PriceSheet(prompt=1.0, completion=3.0, cache_read=0.25)
    r = cost_report(summary, price_per_gpu_hour=2.0, gpus=8, prices=prices)
    assert r["cluster_usd_per_hour"] == 16.0
    assert r["output_tok_s_per_gpu"] == 125.0
    assert r["total_tok_s_per_gpu"] == 2625.0
    # $16/h / (1000 tok/s * 3600) * 1e6 = $4.444/M output
    assert r["usd_per_m_output"] == pytest.approx(16 / 3.6)
    assert r["usd_per_m_total"] == pytest.approx(16 / (21000 * 3600) * 1e6)
    # 12,000 cached tok/s excluded: 9,000 tok/s left
    assert r["usd_per_m_uncached_total"] == pytest.approx(16 / (9000 * 3600) * 1e6)
    assert r["output_tokens_per_usd"] == pytest.approx(1000 * 3600 / 16)
    # revenue/s = 8000*1.0 + 12000*0.25 + 1000*3.0 = 14,000 $/M-tok/s -> $0.014/s -> $50.4/h
    assert r["revenue_usd_per_hour"] == pytest.approx(50.4)
    assert r["cache_read_revenue_usd_per_hour"] == pytest.approx(12000 * 0.25 / 1e6 * 3600)
    assert r["margin_usd_per_hour"] == pytest.approx(50.4 - 16.0)
    assert r["gross_margin"] == pytest.approx((50.4 - 16.0) / 50.4)


def test_cost_report_over_two_nodes():
    summary = _rates(4000.0, 8000.0, 4000.0, 0.0)
    r = cost_report(summary, 1.5, gpus=16, nodes=2)
    assert r["output_tok_s_per_node"] == 2000.0 and r["output_tok_s_per_gpu"] == 250.0
    assert "revenue_usd_per_hour" not in r
