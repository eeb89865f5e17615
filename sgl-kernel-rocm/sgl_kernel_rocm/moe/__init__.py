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
from sgl_kernel_rocm.moe.reference import fused_moe_reference, prepare_reference_weights
from sgl_kernel_rocm.moe.routing import grouped_sigmoid_topk, softmax_topk
from sgl_kernel_rocm.moe.weights import MoEWeights, validate_routing

__all__ = [
    "MoEWeightLayout",
    "MoEWeights",
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


def fused_moe_mxfp4(
    hidden_states: torch.Tensor,
    weights: MoEWeights,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    act_quant: str = "none",
    activation: str = "silu",
    backend: str = "auto",
    shared_output: torch.Tensor | None = None,
    path: str = "auto",
    config: dict | None = None,
    prepared: MoEWeights | None = None,
    layout: MoEWeightLayout | None = None,
) -> torch.Tensor:
    """MoE forward: sum_k w[t,k] * W2[e] (silu(G[e] x) * U[e] x) (+ shared_output) -> [T, H].

    `weights` are MXFP4 (see `MoEWeights`); topk_ids of -1 contribute nothing.
    Extensions beyond the serving contract: `path` forces the Triton code path ("dot_scaled" or
    "unpack"; "auto" picks per arch), `config` overrides the launch config, `prepared` gives the
    torch backend weights dequantized once at load time (`prepare_reference_weights`), `layout`
    (from `prepare_weights`, at load) lets the Triton kernels take the one-multiply FP4 upcast.
    """
    if act_quant not in _ACT_QUANTS:
        raise ValueError(f"act_quant must be one of {_ACT_QUANTS}, got {act_quant!r}")
    if activation != "silu":
        raise ValueError(f"only activation='silu' (SwiGLU) is supported, got {activation!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if path not in _PATHS:
        raise ValueError(f"path must be one of {_PATHS}, got {path!r}")
    if not isinstance(weights, MoEWeights) or not weights.is_mxfp4:
        raise ValueError("weights must be MoEWeights with MXFP4 tensors and scales")
    weights.validate()
    validate_routing(hidden_states, weights.hidden, topk_weights, topk_ids, shared_output)

    backend = resolve_backend(backend, hidden_states.device.type)
    if backend == "torch" or hidden_states.shape[0] == 0:
        return fused_moe_reference(
            hidden_states, weights, topk_weights, topk_ids,
            act_quant=act_quant, shared_output=shared_output, prepared=prepared,
        )  # fmt: skip
    from sgl_kernel_rocm.moe.triton_moe import fused_moe_triton

    return fused_moe_triton(
        hidden_states, weights, topk_weights, topk_ids,
        act_quant=act_quant, shared_output=shared_output, path=path, config=config, layout=layout,
    )  # fmt: skip
