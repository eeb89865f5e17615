"""The bf16-weight baseline: our fused MoE kernels (same alignment, grouping, tiles, fused
top-k sum) on bf16/fp16 expert weights, so a GPU run can state the MXFP4 speed-up as a ratio of
two kernels that differ only in the weight format (scripts/gpu_check.sh)."""

from __future__ import annotations

import torch

from sgl_kernel_rocm.moe.backend import resolve_backend
from sgl_kernel_rocm.moe.reference import fused_moe_reference
from sgl_kernel_rocm.moe.weights import MoEWeights, validate_routing

# One decode-sized tile for every token count (no tuned table for bf16 weights): it passes the
# compile gate on all four archs (the heuristic's larger tiles do not on AMD). The baseline
# exists for the W4A16 speed-up at decode sizes; at prefill sizes it is not a tuned kernel.
BF16_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 2}


def fused_moe_bf16(
    hidden_states: torch.Tensor,
    weights: MoEWeights,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    backend: str = "auto",
    shared_output: torch.Tensor | None = None,
    config: dict | None = None,
) -> torch.Tensor:
    """SwiGLU MoE with bf16/fp16 weights (`MoEWeights.dense(w13 [E, 2I, H], w2 [E, H, I])`);
    otherwise as `fused_moe_mxfp4` (W4A16). backend "torch" is the reference."""
    if weights.is_mxfp4:
        raise ValueError("fused_moe_bf16 takes MoEWeights.dense(w13, w2) (bf16 or fp16)")
    weights.validate(multiple=64)
    validate_routing(hidden_states, weights.hidden, topk_weights, topk_ids, shared_output)
    if resolve_backend(backend, hidden_states.device.type) == "torch":
        return fused_moe_reference(
            hidden_states, weights, topk_weights, topk_ids, shared_output=shared_output
        )
    from sgl_kernel_rocm.moe.triton_moe import fused_moe_triton

    return fused_moe_triton(
        hidden_states, weights, topk_weights, topk_ids, shared_output=shared_output,
        config=config if config is not None else dict(BF16_CONFIG),
    )  # fmt: skip
