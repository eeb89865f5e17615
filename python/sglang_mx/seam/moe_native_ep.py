"""SGLang's bf16 MoE on the CPU platform under expert parallelism.

With `--ep-size N`, SGLang 0.5.23's top-k marks the slots routed to another rank's experts with
id -1 (each rank's partial sum is all-reduced afterwards). Our MXFP4 experts skip such slots, but
bf16 experts on a CPU (an MTP draft's NextN layer: its experts stay unquantized) run
`layers/moe/fused_moe_native.moe_forward_native`, which indexes with -1 and dies ("index -1 is
out of bounds"); mapping -1 to an expert with weight 0 is not enough either, since it counts
tokens per expert with `scatter_` (a token's two slots on one expert count once). When a batch
has remote slots, the hook runs the local experts itself (SiLU-gated, no biases: what the
DeepSeek/GLM NextN layer has); every other call goes to SGLang's function unchanged."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from sglang_mx.sglang_version import hook

TARGET = "sglang.srt.layers.moe.fused_moe_native.moe_forward_native"


def local_experts_forward(
    x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor
) -> torch.Tensor:
    """sum over a token's slots with a local expert (id >= 0) of weight * SwiGLU expert output;
    slots with id -1 belong to another rank and add nothing. w13 [E, 2I, H] (gate half first),
    w2 [E, H, I]; accumulated in fp32, returned in x's dtype."""
    out = torch.zeros(x.shape[0], w2.shape[1], dtype=torch.float32, device=x.device)
    inter = w2.shape[2]
    for e in torch.unique(ids[ids >= 0]).tolist():
        token, slot = (ids == e).nonzero(as_tuple=True)
        gate_up = F.linear(x[token], w13[e])
        act = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        y = F.linear(act, w2[e]).float() * weights[token, slot].float().unsqueeze(-1)
        out.index_add_(0, token, y)
    return out.to(x.dtype)


def _plain_swiglu(layer: Any, config: Any) -> bool:
    return (
        config.activation == "silu"
        and getattr(config, "gemm1_alpha", None) is None
        and getattr(layer, "w13_weight_bias", None) is None
        and getattr(layer, "w2_weight_bias", None) is None
    )


def _native_moe(original, layer, x, topk_output, moe_runner_config):
    ids = topk_output.topk_ids
    if not bool((ids < 0).any()):
        return original(layer, x, topk_output, moe_runner_config)
    if not _plain_swiglu(layer, moe_runner_config):
        raise NotImplementedError(
            "sglang_mx: bf16 MoE with expert parallelism on a CPU serves SiLU-gated experts "
            f"without biases; this layer has activation {moe_runner_config.activation!r}"
        )
    return local_experts_forward(
        x, layer.w13_weight, layer.w2_weight, topk_output.topk_weights, ids
    )


def register() -> None:
    hook(TARGET, _native_moe, "AROUND")
