"""Roofline model against hand-computed limits of a small config, and GLM-5.2 sanity figures."""

from __future__ import annotations

import pytest
from sglang_mx.capacity.hardware import Hardware, get_hardware
from sglang_mx.capacity.modelspec import from_hf_config, load_model
from sglang_mx.capacity.parallel import Layout, parse_layout
from sglang_mx.capacity.roofline import Precision, Workload, limits

SMALL = {
    "hidden_size": 8,
    "num_hidden_layers": 2,
    "first_k_dense_replace": 1,
    "intermediate_size": 16,
    "moe_intermediate_size": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 0,
    "vocab_size": 10,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
}
# 10 kB HBM at 1 kB/s and 1 kFLOP/s: numbers small enough to check by hand
TOY_HW = Hardware(
    "toy",
    "none",
    hbm_gb=1e-5,
    hbm_tb_s=1e-9,
    tflops={"bf16": 1e-9},
    price_per_gpu_hour=1.0,
    price_source="test",
)
TOY_PREC = Precision(
    expert_bits=8,
    dense_bytes=2,
    kv_bytes=2,
    index_bytes=0,
    expert_dtype="bf16",
    dense_dtype="bf16",
    attn_dtype="bf16",
)


def test_small_model_parameter_counts():
    m = from_hf_config(SMALL)
    assert m.attn_params_per_layer == 192  # q 64 + o 64 + k,v 2*8*4
    assert m.dense_params == 800  # attn 2*192 + dense MLP 3*8*16 + router 8*4
    assert m.routed_params == 384  # 4 experts * 3*8*4, one MoE layer
    assert m.total_params == 1344  # + embed 80 + lm_head 80
    assert m.active_linear_params == 1072  # 800 + 2 experts * 96 + lm_head 80
    assert m.kv_bytes_per_token(2, 0) == 32  # 2 layers * (k+v 8 values) * 2 B


def test_small_model_limits_by_hand():
    m = from_hf_config(SMALL)
    lim = limits(m, TOY_HW, Layout(1, 1, 1, 1), Workload(10, 4, 0.5), TOY_PREC, concurrency=4)
    # weights: (800 + 80 lm_head + 80 embed) * 2 B + 384 experts * 1 B = 2304 B
    assert lim.weight_bytes_per_gpu == 2304
    # KV: (10,000 * 0.9 - 2304) / 32 B per token = 209.25 tokens; 14-token requests -> 14
    assert lim.kv_tokens_node == pytest.approx(209.25)
    assert lim.max_concurrency == 14 and lim.concurrency == 4
    # prefill of 5 new tokens: experts 2*96*2*5 = 1920, dense 2*800*5 + lm_head 2*80 = 8160,
    # attention 2 layers * 2*2*(4+4) FLOPs/key * (6+7+8+9+10) keys = 2560 -> 12,640 FLOPs
    assert lim.prefill_s_per_request == pytest.approx(12.64)
    # decode step, 4 sequences at mean context 12: bytes 1760 + 384*(1 - 0.5**4) + 4*2*12*8*2
    assert lim.decode_memory_s == pytest.approx((1760 + 360 + 1536) / 1000)
    # FLOPs per token 384 + 1760 + 2*32*12 = 2912, four tokens -> 11.648 s: compute-bound
    assert lim.decode_compute_s == pytest.approx(11.648)
    d = 4 / 11.648
    assert lim.decode_tok_s == pytest.approx(d)
    r = d / (4 + d * 12.64)  # prefill and decode share the GPU
    assert lim.req_s == pytest.approx(r)
    assert lim.output_tok_s == pytest.approx(4 * r)
    assert lim.total_tok_s == pytest.approx(14 * r)
    assert lim.bound == "prefill-compute"  # 1/12.64 req/s < d/4 req/s


def test_concurrency_is_capped_by_kv_capacity():
    m = from_hf_config(SMALL)
    lim = limits(m, TOY_HW, Layout(1, 1, 1, 1), Workload(10, 4, 0.5), TOY_PREC, concurrency=99)
    assert lim.concurrency == 14 and lim.bound == "kv-capacity"


def test_glm52_shape_matches_public_figures():
    m = load_model("glm-5.2")
    assert 740e9 < m.total_params < 755e9  # 744B listed (743-753B)
    assert 38e9 < m.active_linear_params < 42e9  # 40B active
    assert m.kv_bytes_per_token(2.0, 0.0) == 89_856  # MLA latent 576 x 78 layers x 2 B
    assert m.kv_bytes_per_token(1.0, 0.0) == 44_928


def test_layouts_and_mla_kv_replication():
    assert parse_layout("tp8") == Layout(8, 8, 1, 8, "tp8")
    assert parse_layout("tp4xdp2") == Layout(8, 4, 2, 4, "tp4xdp2")
    assert parse_layout("tp8-dpattn8") == Layout(8, 1, 8, 8, "tp8-dpattn8")
    with pytest.raises(ValueError):
        parse_layout("pp2")
    m, hw, w = load_model("glm-5.2"), get_hardware("MI355X"), Workload(20000, 1000, 0.6)
    tp8 = limits(m, hw, parse_layout("tp8"), w)
    dpa = limits(m, hw, parse_layout("tp8-dpattn8"), w)
    # MLA's latent is replicated over attention-TP ranks, so DP attention holds ~8x the tokens
    # less what its replicated attention weights take
    assert dpa.kv_tokens_node > 5 * tp8.kv_tokens_node
    assert tp8.output_tok_s > 2626  # the public measurement sits under the roof


def test_missing_dtype_falls_back_to_wider():
    h200 = get_hardware("h200")
    assert h200.flops("fp4") == h200.flops("fp8") == 1979e12
