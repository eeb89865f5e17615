"""Fused MXFP4 mixture-of-experts: SwiGLU experts with MXFP4 weights (W4A16) or MXFP4 weights and
activations (W4A4), top-k weighted sum, optional shared-expert output added.

`fused_moe_mxfp4` is the one entry point. backend="auto" runs the Triton kernels on GPU tensors
and the torch reference on CPU tensors; "triton" on CPU tensors needs TRITON_INTERPRET=1.
Routers live in `sgl_kernel_rocm.moe.routing`.
"""

from __future__ import annotations

import torch

from sgl_kernel_rocm.moe.backend import BACKENDS as _BACKENDS
from sgl_kernel_rocm.moe.backend import resolve_backend
from sgl_kernel_rocm.moe.bf16 import fused_moe_bf16
from sgl_kernel_rocm.moe.layout import MoEWeightLayout, prepare_weights
from sgl_kernel_rocm.moe.reference import (
    DequantizedExperts,
    fused_moe_reference,
    prepare_reference_weights,
)
from sgl_kernel_rocm.moe.routing import grouped_sigmoid_topk, softmax_topk

__all__ = [
    "DequantizedExperts",
    "MoEWeightLayout",
    "fused_moe_bf16",
    "fused_moe_mxfp4",
    "grouped_sigmoid_topk",
    "prepare_reference_weights",
    "prepare_weights",
    "resolve_backend",
    "softmax_topk",
]

_ACT_QUANTS = ("none", "mxfp4")
_PATHS = ("auto", "dot_scaled", "unpack")


def _validate(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, shared_output):
    if hidden_states.dim() != 2:
        raise ValueError(f"hidden_states must be [T, H], got shape {tuple(hidden_states.shape)}")
    num_tokens, hidden = hidden_states.shape
    if w13.dtype != torch.uint8 or w2.dtype != torch.uint8:
        raise ValueError(f"w13/w2 must be packed MXFP4 uint8, got {w13.dtype} and {w2.dtype}")
    if w13.dim() != 3 or w2.dim() != 3:
        raise ValueError("w13 must be [E, 2I, H/2] and w2 [E, H, I/2]")
    num_experts, two_inter, half_h = w13.shape
    inter = two_inter // 2
    if hidden % 32 or inter % 32:
        raise ValueError(
            f"hidden ({hidden}) and intermediate ({inter}) sizes must be multiples of 32"
        )
    expected = {
        "w13": (w13, (num_experts, 2 * inter, hidden // 2)),
        "w13_scale": (w13_scale, (num_experts, 2 * inter, hidden // 32)),
        "w2": (w2, (num_experts, hidden, inter // 2)),
        "w2_scale": (w2_scale, (num_experts, hidden, inter // 32)),
    }
    for name, (t, shape) in expected.items():
        if tuple(t.shape) != shape:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}, expected {shape} for hidden={hidden}, "
                f"intermediate={inter}, experts={num_experts}"
            )
    if (
        topk_ids.shape != topk_weights.shape
        or topk_ids.dim() != 2
        or topk_ids.shape[0] != num_tokens
    ):
        raise ValueError(
            f"topk_ids {tuple(topk_ids.shape)} and topk_weights {tuple(topk_weights.shape)} must "
            f"both be [T={num_tokens}, K]"
        )
    if shared_output is not None and tuple(shared_output.shape) != (num_tokens, hidden):
        raise ValueError(
            f"shared_output must be [{num_tokens}, {hidden}], got {tuple(shared_output.shape)}"
        )


def fused_moe_mxfp4(
    hidden_states: torch.Tensor,
    w13: torch.Tensor,
    w13_scale: torch.Tensor,
    w2: torch.Tensor,
    w2_scale: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    act_quant: str = "none",
    activation: str = "silu",
    backend: str = "auto",
    shared_output: torch.Tensor | None = None,
    path: str = "auto",
    config: dict | None = None,
    prepared: DequantizedExperts | None = None,
    layout: MoEWeightLayout | None = None,
) -> torch.Tensor:
    """MoE forward: sum_k w[t,k] * W2[e] (silu(G[e] x) * U[e] x) (+ shared_output) -> [T, H].

    w13 is [E, 2I, H/2] (gate rows, then up rows) and w2 [E, H, I/2], packed along the
    reduction dim, with E8M0 scales [.., /32]. topk_ids of -1 contribute nothing.
    Extensions beyond the serving contract: `path` forces the Triton code path ("dot_scaled" or
    "unpack"; "auto" picks per arch), `config` overrides the launch config, `prepared` gives the
    torch backend weights dequantized once at load time, `layout` (from
    `prepare_weights`, at load) lets the Triton kernels take the one-multiply FP4 upcast.
    """
    if act_quant not in _ACT_QUANTS:
        raise ValueError(f"act_quant must be one of {_ACT_QUANTS}, got {act_quant!r}")
    if activation != "silu":
        raise ValueError(f"only activation='silu' (SwiGLU) is supported, got {activation!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if path not in _PATHS:
        raise ValueError(f"path must be one of {_PATHS}, got {path!r}")
    _validate(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, shared_output)

    backend = resolve_backend(backend, hidden_states.device.type)
    if backend == "torch" or hidden_states.shape[0] == 0:
        return fused_moe_reference(
            hidden_states,
            w13,
            w13_scale,
            w2,
            w2_scale,
            topk_weights,
            topk_ids,
            act_quant=act_quant,
            shared_output=shared_output,
            prepared=prepared,
        )
    from sgl_kernel_rocm.moe.triton_moe import fused_moe_triton

    return fused_moe_triton(
        hidden_states,
        w13,
        w13_scale,
        w2,
        w2_scale,
        topk_weights,
        topk_ids,
        act_quant=act_quant,
        shared_output=shared_output,
        path=path,
        config=config,
        layout=layout,
    )
