"""The bf16-weight baseline: our fused MoE kernels (same alignment, grouping, tiles, fused
top-k sum) on bf16/fp16 expert weights, so a GPU run can state the MXFP4 speed-up as a ratio of
two kernels that differ only in the weight format (scripts/gpu_check.sh)."""

from __future__ import annotations

import torch

from sgl_kernel_rocm.moe.backend import resolve_backend
from sgl_kernel_rocm.moe.reference import DequantizedExperts, fused_moe_reference

# One decode-sized tile for every token count (no tuned table for bf16 weights): it passes the
# compile gate on all four archs (the heuristic's larger tiles do not on AMD). The baseline
# exists for the W4A16 speed-up at decode sizes; at prefill sizes it is not a tuned kernel.
BF16_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 2}


def fused_moe_bf16(
    hidden_states: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    backend: str = "auto",
    shared_output: torch.Tensor | None = None,
    config: dict | None = None,
) -> torch.Tensor:
    """SwiGLU MoE with bf16/fp16 weights w13 [E, 2I, H] (gate rows, then up) and w2 [E, H, I];
    otherwise as `fused_moe_mxfp4` (W4A16). backend "torch" is the reference."""
    if w13.dtype not in (torch.bfloat16, torch.float16) or w2.dtype != w13.dtype:
        raise ValueError(f"w13/w2 must both be bf16 or fp16, got {w13.dtype} and {w2.dtype}")
    num_experts, two_inter, hidden = w13.shape
    if hidden_states.dim() != 2 or hidden_states.shape[1] != hidden:
        raise ValueError(f"hidden_states must be [T, {hidden}], got {tuple(hidden_states.shape)}")
    if tuple(w2.shape) != (num_experts, hidden, two_inter // 2) or two_inter % 2:
        raise ValueError(f"w2 must be [{num_experts}, {hidden}, {two_inter // 2}], got "
                         f"{tuple(w2.shape)}")  # fmt: skip
    if hidden % 64 or (two_inter // 2) % 64:
        raise ValueError("hidden and intermediate sizes must be multiples of 64")
    if topk_ids.shape != topk_weights.shape or topk_ids.shape[0] != hidden_states.shape[0]:
        raise ValueError("topk_ids and topk_weights must both be [T, K]")
    if resolve_backend(backend, hidden_states.device.type) == "torch":
        return fused_moe_reference(
            hidden_states, w13, None, w2, None, topk_weights, topk_ids,
            shared_output=shared_output, prepared=DequantizedExperts(w13=w13, w2=w2),
        )  # fmt: skip
    from sgl_kernel_rocm.moe.triton_moe import fused_moe_triton

    if config is None:
        config = dict(BF16_CONFIG)
    return fused_moe_triton(
        hidden_states, w13, w13, w2, w2, topk_weights, topk_ids,
        shared_output=shared_output, config=config,
    )  # fmt: skip
