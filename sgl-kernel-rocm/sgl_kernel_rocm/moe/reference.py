"""Torch reference of the fused MXFP4 MoE; also the CPU serving path.

Vectorized per expert: the (token, slot) pairs are grouped by expert once, then each expert
that received tokens dequantizes its own weights and runs two matmuls on its tokens. There is
no loop over tokens and nothing is cached between calls; `prepare_reference_weights` is the
explicit, load-time way to skip the per-call dequantization.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sgl_kernel_rocm.moe.weights import MoEWeights
from sgl_kernel_rocm.mx import dequantize_mxfp4, quantize_mxfp4


def prepare_reference_weights(
    weights: MoEWeights, dtype: torch.dtype = torch.float32
) -> MoEWeights:
    """Dequantize every expert once (4x/8x the memory of MXFP4: for small models on CPU): the
    same experts as unscaled weights, which `fused_moe_reference(prepared=)` reads as they are."""
    if not weights.is_mxfp4:
        return MoEWeights.dense(weights.w13.to(dtype), weights.w2.to(dtype))
    return MoEWeights.dense(
        dequantize_mxfp4(weights.w13, weights.w13_scale, dtype=dtype),
        dequantize_mxfp4(weights.w2, weights.w2_scale, dtype=dtype),
    )


def fake_quant_mxfp4(x: torch.Tensor) -> torch.Tensor:
    """Round-trip through MXFP4 along the last axis (fp32 out): what W4A4 feeds the matmul."""
    q, s = quantize_mxfp4(x, -1)
    return dequantize_mxfp4(q, s, -1, dtype=torch.float32)


def fused_moe_reference(
    hidden_states: torch.Tensor,
    weights: MoEWeights,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    act_quant: str = "none",
    shared_output: torch.Tensor | None = None,
    prepared: MoEWeights | None = None,
) -> torch.Tensor:
    """SwiGLU MoE in fp32; the SwiGLU output is rounded to the activation dtype, as kernels
    store it there between the two GEMMs. `prepared` (from `prepare_reference_weights`) stands
    in for `weights` when given; MXFP4 weights are dequantized per expert and call."""
    experts = prepared if prepared is not None else weights
    num_tokens, hidden = hidden_states.shape
    top_k = topk_ids.shape[1]
    num_experts = experts.num_experts
    inter = experts.inter
    out = torch.zeros(num_tokens, hidden, dtype=torch.float32, device=hidden_states.device)

    ids = topk_ids.reshape(-1).to(torch.int64)
    route_w = topk_weights.reshape(-1).to(torch.float32)
    valid = ids >= 0
    key = torch.where(valid, ids, torch.full_like(ids, num_experts))
    order = torch.argsort(key, stable=True)
    counts = torch.bincount(key, minlength=num_experts + 1)[:num_experts].tolist()

    x = hidden_states.to(torch.float32)
    if act_quant == "mxfp4":
        x = fake_quant_mxfp4(x)

    start = 0
    for expert, count in enumerate(counts):
        if count == 0:
            continue
        slots = order[start : start + count]
        start += count
        tokens = slots // top_k
        w13_e, w2_e = experts.expert(expert)
        gate_up = x[tokens] @ w13_e.T
        act = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        act = act.to(hidden_states.dtype).to(torch.float32)
        if act_quant == "mxfp4":
            act = fake_quant_mxfp4(act)
        out.index_add_(0, tokens, (act @ w2_e.T) * route_w[slots, None])

    if shared_output is not None:
        out += shared_output.to(torch.float32)
    return out.to(hidden_states.dtype)
