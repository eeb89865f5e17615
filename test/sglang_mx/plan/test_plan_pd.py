"""The planner's PD model: the KV bytes a request ships (against the config's fields and against
SGLang 0.5.23's own pool), the NIC it crosses, and when SGLang's PD scheduler loops let each step
happen (bootstrap, send after the result is processed, first token from the decode side)."""

from __future__ import annotations

import json
import types

import pytest
from plan_support import BASE, COST, PER_DECODE, PER_TOKEN, cfg, trace
from sglang_mx.capacity.hardware import get_hardware
from sglang_mx.capacity.modelspec import from_hf_config, index_layer_count, load_model
from sglang_mx.capacity.roofline import Precision
from sglang_mx.plan.engine import Engine
from sglang_mx.plan.layouts import parse_plan_layout
from sglang_mx.plan.links import link_for, scaleout_for
from sglang_mx.plan.planner import Deployment
from sglang_mx.plan.sim import Group, simulate

TINY = "python/sglang_mx/assets/tiny-glm5-quark/config.json"


def test_glm52_kv_bytes_per_token_from_its_config_fields():
    m = load_model("glm-5.2")
    # MLA latent: kv_lora_rank 512 + qk_rope_head_dim 64 values in each of 78 layers; DSA index
    # keys: index_head_dim 128 FP8 values + one fp32 scale per 128, in the layers that run their
    # own indexer (GLM-5.2 IndexShare: the first of every 4 layers -> layers 0, 4, ..., 76 = 20)
    latent = 78 * (512 + 64)
    index = len(range(0, 78, 4)) * (128 * 1 + 128 // 128 * 4)
    assert m.indexer_layers == 20
    assert m.kv_bytes_per_token(1.0, 1.0) == latent * 1 + index == 47_568  # FP8 KV
    assert m.kv_bytes_per_token(2.0, 1.0) == latent * 2 + index == 92_496  # bf16 KV


def _sglang_pd_bytes_per_token(cfg_dict: dict, fp8: bool) -> int:
    """Bytes per token SGLang 0.5.23's DSATokenToKVPool describes to its PD transfer backends:
    the MLA latent buffers (get_contiguous_buf_infos) plus the index-key state
    (get_state_buf_infos), per 64-token page; index layers skipped by SGLang's own rule."""
    import torch
    from sglang.srt.configs.model_config import dsa_layer_skips_topk
    from sglang.srt.mem_cache.memory_pool import DSATokenToKVPool
    from sglang.srt.runtime_context import get_parallel

    get_parallel().override_permanently(attn_dcp_size=1, dcp_enabled=False)
    layers = cfg_dict["num_hidden_layers"]
    conf = types.SimpleNamespace(**cfg_dict)
    pool = DSATokenToKVPool(
        size=64,
        page_size=64,
        kv_lora_rank=cfg_dict["kv_lora_rank"],
        dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16,
        qk_rope_head_dim=cfg_dict["qk_rope_head_dim"],
        layer_num=layers,
        device="cpu",
        index_head_dim=cfg_dict["index_head_dim"],
        enable_memory_saver=False,
        kv_cache_dim=cfg_dict["kv_lora_rank"] + cfg_dict["qk_rope_head_dim"],  # the raw HIP row
        skip_topk_layers=[dsa_layer_skips_topk(conf, i) for i in range(layers)],
    )
    kv_items = pool.get_contiguous_buf_infos()[2]
    state_items = pool.get_state_buf_infos()[2]
    total = sum(kv_items) + sum(state_items)
    assert total % 64 == 0
    return total // 64


@pytest.mark.parametrize("fp8", [True, False])
def test_per_token_bytes_are_what_sglang_ships(fp8):
    tiny = json.loads(open(TINY).read())  # indexer_types full/shared/full/shared: 2 index layers
    glm52 = json.loads(open("python/sglang_mx/capacity/data/models.json").read())["glm-5.2"]
    glm52 = glm52 | {"indexer_types": ["shared" if i % 4 else "full" for i in range(78)]}
    for c in (tiny, glm52):
        spec = from_hf_config(c)
        assert spec.kv_bytes_per_token(1.0 if fp8 else 2.0, 1.0) == _sglang_pd_bytes_per_token(
            c, fp8
        )
    assert from_hf_config(tiny).indexer_layers == 2


@pytest.mark.parametrize(
    "fields",
    [
        {"index_topk_freq": 4},
        {"index_topk_freq": 4, "index_skip_topk_offset": 1},
        {"index_topk_freq": 2, "index_skip_topk_offset": 3},
        {"index_topk_pattern": "FSSFFS" * 13},
        {"indexer_types": ["full", "shared", "shared"] * 26},
    ],
)
def test_index_layer_count_is_sglangs_rule(fields):
    from sglang.srt.configs.model_config import dsa_layer_skips_topk

    conf = types.SimpleNamespace(architectures=["GlmMoeDsaForCausalLM"], index_topk=2048, **fields)
    want = sum(not dsa_layer_skips_topk(conf, i) for i in range(78))
    assert index_layer_count(fields, 78) == want
    assert index_layer_count({}, 78) is None  # no sharing field: the table's index_share_every


class _Req:
    input_len = 20_000


def test_pd_handoff_crosses_the_scaleout_nic_not_xgmi():
    nic = scaleout_for("MI355X")
    assert nic.name == "pollara400-mi355x" and nic.gb_s == pytest.approx(400 / 8)
    assert "Pollara 400" in nic.source
    dep = Deployment(
        load_model("glm-5.2"),
        get_hardware("MI355X"),
        parse_plan_layout("pd:tp4+tp4"),
        Precision(kv_bytes=1.0),
        link=link_for("MI355X"),
        scaleout=nic,
    )
    # 20,000 prompt tokens x 47,568 B over one 400 Gb/s NIC, plus its latency
    assert dep.handoff_s(_Req()) == pytest.approx(10e-6 + 20_000 * 47_568 / 50e9)
    assert dep.handoff_s(_Req()) > 10 * (20_000 * 47_568 / link_for("MI355X").bytes_per_s)


def test_plan_cli_gives_a_pd_layout_the_nic():
    from sglang_mx.cli.main import build_parser
    from sglang_mx.plan.cli import build_deployment

    args = build_parser().parse_args(["plan", "--layout", "pd:tp4+tp4", "--rates", "1"])
    dep = build_deployment(args, parse_plan_layout("pd:tp4+tp4"))
    assert dep.handoff_link.name == "pollara400-mi355x"
    args = build_parser().parse_args(["plan", "--scaleout", "none", "--rates", "1"])
    assert build_deployment(args, parse_plan_layout("pd:tp4+tp4")).handoff_link.name == (
        "xgmi-mi355x"
    )


def _pd(sync: bool = False) -> list[Group]:
    return [
        Group([Engine(cfg(sync_forward=sync), role="prefill")], COST),
        Group([Engine(cfg(sync_forward=sync), role="decode")], COST),
    ]


def test_prefill_waits_for_the_decode_loop_and_first_token_for_decode_admission():
    # A: 1000 tokens at 0, prefill 0 -> 0.11, decode steps of 0.011 s from 0.11 on.
    # B arrives at 0.2, inside decode step 8 (0.198 -> 0.209): the decode scheduler
    # pre-allocates (bootstraps) B at 0.209; B prefills 100 tokens 0.209 -> 0.229, its KV lands
    # inside decode step 10 (0.22 -> 0.231) and B's first token goes out at 0.231.
    tr = trace([("a", [("u", 1000)], 40, 0.0), ("b", [("v", 100)], 4, 0.2)])
    res = simulate(tr, _pd(), handoff_s=lambda r: 0.0)
    prefill_starts = [s.start for s in res.steps if s.group == 0]
    assert prefill_starts == pytest.approx([0.0, 0.209])
    a, b = res.request_results()
    assert a.ttft == pytest.approx(BASE + 1000 * PER_TOKEN)
    assert b.ttft == pytest.approx(0.231 - 0.2)
    assert b.itl == pytest.approx([BASE + 2 * PER_DECODE] * 3)


def test_cpu_prefill_sends_the_kv_after_its_next_forward():
    # A (1000 tokens) prefills 0 -> 0.11; B (500) arrived meanwhile and prefills 0.11 -> 0.17.
    # On a CPU the overlap loop processes A's result (and sends its KV) after B's forward.
    tr = trace([("a", [("u", 1000)], 4, 0.0), ("b", [("v", 500)], 4, 0.05)])
    for sync, sent in ((False, 0.11), (True, 0.17)):
        res = simulate(tr, _pd(sync), handoff_s=lambda r: 0.05)
        a = res.request_results()[0]
        assert a.ttft == pytest.approx(sent + 0.05), sync


def test_one_transfer_lane_per_rank_pair_queues_the_kv():
    # two 500-token prompts prefilled together (0 -> 0.11); each handoff takes 0.1 s of which
    # 0.08 s holds the lane: a lands at 0.21, b's transfer starts at 0.19 and lands at 0.29
    # (a's 3 decode steps end at 0.243, so the decode side is idle then)
    tr = trace([("a", [("u", 500)], 4, 0.0), ("b", [("v", 500)], 4, 0.0)])
    res = simulate(tr, _pd(), handoff_s=lambda r: 0.1, handoff_serial_s=lambda r: 0.08)
    a, b = res.request_results()
    assert a.ttft == pytest.approx(BASE + 1000 * PER_TOKEN + 0.1)
    assert b.ttft == pytest.approx(BASE + 1000 * PER_TOKEN + 0.08 + 0.1)
    # without a lane both land at 0.21 and join the same decode batch
    a, b = simulate(tr, _pd(), handoff_s=lambda r: 0.1).request_results()
    assert a.ttft == b.ttft == pytest.approx(0.21)
