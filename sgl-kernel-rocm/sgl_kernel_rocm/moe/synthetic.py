"""Synthetic MoE inputs for benchmarks and tuning: random MXFP4 bytes made directly on the target
device (quantizing GLM-sized fp32 weights on the host would take tens of GB and minutes)."""

from __future__ import annotations

import torch

from sgl_kernel_rocm.moe.routing import softmax_topk
from sgl_kernel_rocm.moe.weights import MoEWeights


def random_moe_inputs(
    tokens: int,
    experts: int,
    hidden: int,
    inter: int,
    top_k: int,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
) -> tuple[torch.Tensor, MoEWeights, torch.Tensor, torch.Tensor]:
    """(x, MoEWeights, topk_weights, topk_ids) with uniform random routing.

    Scales 2**-8..2**-5 keep E2M1 values (|v| <= 6) at the size of trained expert weights.
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def bytes_(*shape, low=0, high=256):
        return torch.randint(low, high, shape, generator=gen, dtype=torch.uint8).to(device)

    w13 = bytes_(experts, 2 * inter, hidden // 2)
    w13_scale = bytes_(experts, 2 * inter, hidden // 32, low=119, high=123)
    w2 = bytes_(experts, hidden, inter // 2)
    w2_scale = bytes_(experts, hidden, inter // 32, low=119, high=123)
    x = torch.randn(tokens, hidden, generator=gen).to(device=device, dtype=dtype)
    logits = torch.randn(tokens, experts, generator=gen).to(device)
    topk_weights, topk_ids = softmax_topk(logits, min(top_k, experts), renormalize=True)
    return x, MoEWeights(w13, w13_scale, w2, w2_scale), topk_weights, topk_ids
