"""The DSA indexer's `native` forward (SGLang 0.5.23's `Indexer.forward_native` raises).

Registered with `BaseFusedOp.register_oot_forward(Indexer, indexer_forward_native, "native")`,
SGLang's own hook: our CPU platform's dispatch key is "native", so every full-indexer layer of a
DSA model (DeepseekV2AttentionMLA.indexer) lands here. Same math as SGLang's GPU indexer:
q = wq_b(q_lora), k = LayerNorm(wk(x)), RoPE on the first rope dims (interleaved unless
`indexer_rope_interleave` is false -- the layer's own rotary_emb decides), Hadamard rotation,
k quantized to FP8 into the pool's index-key pages, head gate w = weights_proj(x) / sqrt(heads)
* softmax_scale, score = sum_h w_h relu(q_h . k), causal top-k. Queries stay in the compute
dtype (SGLang's GPU path also quantizes q to FP8; that adds error and buys nothing on a CPU).
Scoring and selection go through the attention backend (mx_dsa), which knows the batch layout
and runs the torch path on CPU or sgl_kernel_rocm's Triton indexer for GPU decode.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import torch

from sglang_mx.attention.dsa import hadamard
from sglang_mx.sglang_version import check_version

# Diagnostic: a directory to which every indexer call saves its query positions and top-k (one
# .pt file per layer call), with what a reference needs to re-derive the choice: the call's query
# and head weights and the key rows it wrote (before FP8), in the compute dtype. SGLang's own
# top-k capture (--enable-return-indexer-topk) is CUDA/NPU-only in 0.5.23; tests use this to
# compare served selections with transformers' and with a top-k computed from the key format.
TOPK_DUMP_ENV = "SGLANG_MX_DSA_TOPK_DUMP"
_dump_seq = itertools.count()


def _dump_topk(layer_id: int, positions, topk, query, weights, key) -> None:
    folder = os.environ.get(TOPK_DUMP_ENV)
    if not folder:
        return
    n = next(_dump_seq)
    tensors = dict(positions=positions, topk=topk, query=query, weights=weights, key=key)
    record = {"layer": layer_id} | {name: t.detach().cpu() for name, t in tensors.items()}
    torch.save(record, Path(folder) / f"{os.getpid()}-{n:07d}-L{layer_id}.pt")


def project(indexer: Any, x: torch.Tensor, q_lora: torch.Tensor, positions: torch.Tensor):
    """(query [T, Hi, D], key [T, D], weights [T, Hi]) after RoPE and the Hadamard rotation."""
    if isinstance(x, tuple):  # fused quant paths hand (x_q, scale, x_bf16); not used on CPU
        x = x[-1]
    heads, dim, rope = indexer.n_heads, indexer.head_dim, indexer.rope_head_dim
    query = indexer.wq_b(q_lora)[0].view(-1, heads, dim)
    key = indexer.k_norm(indexer.wk(x)[0])
    q_rope, k_rope = indexer.rotary_emb(
        positions, query[..., :rope].contiguous(), key[..., :rope].contiguous()
    )
    query = torch.cat([q_rope.view(-1, heads, rope), query[..., rope:]], dim=-1)
    key = torch.cat([k_rope.view(-1, rope), key[..., rope:]], dim=-1)
    # SGLang keeps weights_proj in bf16 whatever the model dtype; score the gate in fp32.
    gate = torch.nn.functional.linear(x.float(), indexer.weights_proj.weight.float())
    weights = gate * (heads**-0.5 * indexer.softmax_scale)
    return hadamard.rotate(query), hadamard.rotate(key), weights


def indexer_forward_native(
    self: Any,
    x: torch.Tensor,
    q_lora: torch.Tensor,
    positions: torch.Tensor,
    forward_batch: Any,
    layer_id: int,
    return_indices: bool = True,
    **_: Any,
) -> torch.Tensor | None:
    from sglang.srt.model_executor.forward_context import get_attn_backend, get_token_to_kv_pool

    backend = get_attn_backend()
    if not hasattr(backend, "index_topk"):
        raise RuntimeError(
            "the DSA indexer's native forward needs the mx_dsa attention backend "
            f"(got {type(backend).__name__}); launch with --attention-backend mx_dsa"
        )
    query, key, weights = project(self, x, q_lora, positions)
    pool = get_token_to_kv_pool()
    buf = pool.get_index_k_with_scale_buffer(layer_id)
    backend.index_k_layout().store(buf, forward_batch.out_cache_loc, key)
    if not return_indices:
        return None
    topk = backend.index_topk(query, weights, buf, forward_batch, self.index_topk)
    _dump_topk(layer_id, positions, topk, query, weights, key)
    return topk


def register() -> None:
    from sglang.kernels.fused_op import BaseFusedOp
    from sglang.srt.layers.attention.dsa.dsa_indexer import Indexer

    BaseFusedOp.register_oot_forward(Indexer, indexer_forward_native, "native")


def route_gpu_indexer() -> None:
    """On an in-tree GPU platform (CUDA, or ROCm via the HIP -> CUDA fallback) SGLang 0.5.23
    dispatches the DSA `Indexer` to `forward_cuda` and never consults the out-of-tree forward
    registry; `forward_cuda` asks the attention backend for `get_indexer_metadata` and returns
    no top-k when it gets None -- which would silently make every mx_dsa layer dense. While the
    mx_dsa backend is the active one, route `Indexer.forward_cuda` to our indexer forward (its
    scoring then runs sgl_kernel_rocm's Triton indexer for decode); any other backend keeps
    SGLang's. Installed by the mx_dsa backend when it is created on a GPU."""
    check_version()
    from sglang.srt.layers.attention.dsa.dsa_indexer import Indexer

    original = Indexer.forward_cuda
    if getattr(original, "_sglang_mx_dsa", False):
        return

    def forward_cuda(self, *args, **kwargs):
        from sglang.srt.model_executor.forward_context import get_attn_backend

        if hasattr(get_attn_backend(), "index_topk"):
            return indexer_forward_native(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    forward_cuda._sglang_mx_dsa = True
    Indexer.forward_cuda = forward_cuda
