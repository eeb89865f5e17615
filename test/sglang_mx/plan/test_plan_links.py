"""Communication terms against hand arithmetic (alpha-beta, full mesh)."""

from __future__ import annotations

import pytest
from sglang_mx.capacity.hardware import get_hardware
from sglang_mx.capacity.modelspec import load_model
from sglang_mx.capacity.roofline import Precision
from sglang_mx.plan.efficiency import get_profile
from sglang_mx.plan.layouts import parse_plan_layout
from sglang_mx.plan.links import Link, all_gather_s, all_reduce_s, all_to_all_s, link_for
from sglang_mx.plan.stepcost import RooflineStepCost

LINK = Link("test", gb_s=100.0, latency_us=10.0, source="test")  # 1e11 B/s, 1e-5 s


def test_all_reduce_small_message_is_one_shot():
    # 8 GPUs, 1 MB: one-shot 1e-5 + 7e6/1e11 = 8e-5; two-shot 2e-5 + 2*7/8*1e6/1e11 = 3.75e-5
    assert all_reduce_s(1e6, 8, LINK) == pytest.approx(3.75e-5)
    # 8 KB: one-shot 1e-5 + 7*8e3/1e11 = 1.056e-5 beats two-shot 2e-5 + 1.4e-7
    assert all_reduce_s(8e3, 8, LINK) == pytest.approx(1.056e-5)


def test_gather_and_all_to_all_by_hand():
    assert all_gather_s(8e6, 8, LINK) == pytest.approx(1e-5 + 7 / 8 * 8e6 / 1e11)
    assert all_to_all_s(4e6, 4, LINK) == pytest.approx(1e-5 + 3 / 4 * 4e6 / 1e11)


def test_one_gpu_moves_nothing():
    assert all_reduce_s(1e9, 1, LINK) == all_gather_s(1e9, 1, LINK) == 0.0


def test_datasheet_links_by_hardware():
    assert link_for("MI355X").gb_s == pytest.approx(7 * 153.6 / 2)
    assert link_for("B200").gb_s == pytest.approx(900.0)
    assert "datasheet" in link_for("H200").source


def _cost(layout: str, a2a: bool = False) -> RooflineStepCost:
    lay = parse_plan_layout(layout)
    return RooflineStepCost(
        load_model("glm-5.2"), get_hardware("MI355X"), lay.engine, Precision(),
        get_profile("ideal"), LINK, moe_a2a=a2a or lay.moe_a2a,
    )  # fmt: skip


def test_tp_step_charges_two_all_reduces_per_layer():
    m = load_model("glm-5.2")
    tokens = 64
    msg = tokens * m.hidden * 2
    per = all_reduce_s(msg, 8, LINK)
    assert _cost("tp8").comm_seconds(tokens, tokens) == pytest.approx(2 * m.layers * per)


def test_dp_attention_gathers_and_scatters_per_layer():
    m = load_model("glm-5.2")
    # 8 ranks x 16 tokens: attention needs no all-reduce (attn_tp 1); the MLP gathers all 128
    # tokens' hidden states and reduce-scatters them back on every layer
    gather = all_gather_s(128 * m.hidden * 2, 8, LINK)
    assert _cost("tp8-dpattn8").comm_seconds(16, 128) == pytest.approx(2 * gather * m.layers)


def test_ep_all_to_all_dispatch_and_combine():
    m = load_model("glm-5.2")
    tokens = 64
    ar = all_reduce_s(tokens * m.hidden * 2, 8, LINK)
    a2a = all_to_all_s(tokens / 8 * m.top_k * m.hidden * 2, 8, LINK)
    expected = m.layers * ar + m.moe_layers * 2 * a2a + (m.layers - m.moe_layers) * ar
    assert _cost("tp8-ep").comm_seconds(tokens, tokens) == pytest.approx(expected)
