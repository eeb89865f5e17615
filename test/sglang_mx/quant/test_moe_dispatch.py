"""Routed scaling factor applied exactly once on every platform branch SGLang 0.5.23 has.

The real MoE blocks (`Glm4MoeSparseMoeBlock` for GLM-4.5, `DeepseekV2MoE` for GLM-5's
`GlmMoeDsaForCausalLM`) are built in this process with our MXFP4 quantization config, with the
CPU / CUDA / ROCm / ROCm + aiter branch selected by SGLang's own module flags
(`sglang_mx_lab.testing.platform_branches` names the GPU kernels standing in). Each is compared
with a torch reference: shared(x) + f * sum_k w_k expert_k(x), f = 2.5 as in GLM-5.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from sglang_mx_lab.testing.platform_branches import BRANCHES, select_branch

FACTOR = 2.5
HIDDEN, INTER, EXPERTS, TOPK = 256, 128, 16, 4
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def glm45_config():
    from transformers import Glm4MoeConfig

    return Glm4MoeConfig(
        hidden_size=HIDDEN, moe_intermediate_size=INTER, intermediate_size=512,
        n_routed_experts=EXPERTS, num_experts_per_tok=TOPK, n_shared_experts=1, n_group=1,
        topk_group=1, norm_topk_prob=True, routed_scaling_factor=FACTOR, vocab_size=64,
        num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64,
    )  # fmt: skip


def glm5_config():
    from transformers import GlmMoeDsaConfig

    config = GlmMoeDsaConfig(
        hidden_size=HIDDEN, moe_intermediate_size=INTER, intermediate_size=512,
        n_routed_experts=EXPERTS, num_experts_per_tok=TOPK, n_shared_experts=1, n_group=1,
        topk_group=1, norm_topk_prob=True, routed_scaling_factor=FACTOR, vocab_size=64,
        num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4,
        q_lora_rank=128, kv_lora_rank=512, qk_nope_head_dim=64, qk_rope_head_dim=64,
        v_head_dim=64, index_topk=128, index_n_heads=4, index_head_dim=128,
    )  # fmt: skip
    # Keys SGLang's DeepseekV2MoE reads that HF's config class lacks (CONTEXT.md section 11).
    config.topk_method, config.scoring_func, config.moe_layer_freq = "noaux_tc", "sigmoid", 1
    return config


def build_block(kind: str):
    from sglang_mx.quant.config import MxFp4ExpertsConfig
    from sglang_mx.quant.scheme import MxScheme

    quant = MxFp4ExpertsConfig(MxScheme("mxfp4", "none"), "mxfp4")
    if kind == "glm4_moe":
        from sglang.srt.models.glm4_moe import Glm4MoeSparseMoeBlock

        return Glm4MoeSparseMoeBlock(glm45_config(), 1, quant, prefix="model.layers.1.mlp")
    from sglang.srt.models.deepseek_v2 import DeepseekV2MoE

    return DeepseekV2MoE(glm5_config(), 1, quant, prefix="model.layers.1.mlp")


@torch.no_grad()
def fill(block) -> None:
    """Deterministic weights, identical for every branch; experts through MXFP4."""
    from sgl_kernel_rocm.mx import quantize_mxfp4

    g = torch.Generator().manual_seed(0)
    block.gate.weight.copy_(torch.randn(block.gate.weight.shape, generator=g))
    bias = block.gate.e_score_correction_bias
    bias.copy_(torch.randn(bias.shape, generator=g) * 0.1)
    for name in ("w13", "w2"):
        w = getattr(block.experts, f"{name}_weight")
        e, n, k2 = w.shape
        packed, scales = quantize_mxfp4(torch.randn(e, n, 2 * k2, generator=g) * 0.1, axis=-1)
        w.copy_(packed)
        getattr(block.experts, f"{name}_weight_scale").copy_(scales)
    for p in block.shared_experts.parameters():
        p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    block.experts.quant_method.process_weights_after_loading(block.experts)


@torch.no_grad()
def reference(block, x: torch.Tensor) -> torch.Tensor:
    from sgl_kernel_rocm.moe.routing import grouped_sigmoid_topk
    from sgl_kernel_rocm.mx import dequantize_mxfp4

    weights, ids = grouped_sigmoid_topk(
        x @ block.gate.weight.T, block.gate.e_score_correction_bias, TOPK
    )
    ex = block.experts
    w13 = dequantize_mxfp4(ex.w13_weight, ex.w13_weight_scale, dtype=torch.float32)
    w2 = dequantize_mxfp4(ex.w2_weight, ex.w2_weight_scale, dtype=torch.float32)
    routed = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for w, e in zip(weights[t].tolist(), ids[t].tolist(), strict=True):
            gate, up = (w13[e] @ x[t]).chunk(2)
            routed[t] += w * (w2[e] @ (F.silu(gate) * up))
    se = block.shared_experts
    gate, up = (x @ se.gate_up_proj.weight.T).chunk(2, dim=-1)
    shared = (F.silu(gate) * up) @ se.down_proj.weight.T
    return shared + FACTOR * routed


@pytest.mark.parametrize("kind", ["glm4_moe", "deepseek_v2"])
@pytest.mark.parametrize("branch", BRANCHES)
def test_routed_scaling_applied_exactly_once(sglang_context, monkeypatch, kind, branch):
    from sglang_mx.quant.moe_dispatch import routed_scaling

    select_branch(monkeypatch, branch)
    block = build_block(kind)
    fill(block)
    x = torch.randn(7, HIDDEN, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = block(x.clone())
    ref = reference(block, x)
    owner = routed_scaling(block.experts).owner
    assert owner == {"cpu": "model", "rocm": "model", "rocm_aiter": "router"}.get(branch, "experts")
    # fp32 throughout; a factor missing or applied twice moves the output by ~|routed|.
    rel = ((out - ref).norm() / ref.norm()).item()
    assert rel < 1e-4, f"{kind} on {branch}: relative error {rel:.3g} (scaling by {owner})"
