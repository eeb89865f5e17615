"""SGLang attention backend `mx_triton`: decode on sgl_kernel_rocm's paged GQA kernel.

Decode reads SGLang's token-level KV pool directly (req_to_token rows are page-size-1 block
tables). Prefill/extend, cross attention, logit soft-capping and hybrid SWA pools go to an
existing backend: torch_native on CPU, aiter on ROCm with SGLANG_USE_AITER=1, triton otherwise.

No host syncs in decode: the split plan uses the host-side max of forward_batch.seq_lens_cpu
(eager) or the pool's max context length (CUDA graphs); device lengths are never read.

CUDA graphs (SGLang 0.5.23's hooks): init_cuda_graph_state allocates a block table
[max_bs, max_context_len] and seq_lens [max_bs] once; for a captured batch size bs the decode
reads their first bs rows (fixed addresses), init_forward_metadata_in_graph refills them from
the runner's static req_pool_indices / seq_lens inside the graph, and the launch shape (batch,
KV heads, splits) depends only on bs and the model, so replays of any real batch padded to bs
reuse the captured kernels. The delegate gets the same hooks (layers it serves in decode must be
capturable by it).

SGLang-private access (written for 0.5.23, checked at registration in `registry.py`): ModelRunner's
req_to_token_pool / token_to_kv_pool, KVWriteLoc, MHATokenToKVPool.set_kv_buffer/get_*_buffer,
RadixAttention fields (tp_*_head_num, *_head_dim, scaling, sliding_window_size, logit_cap).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch
from sgl_kernel_rocm.attention import gqa_decode
from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS
from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.mem_cache.memory_pool import KVWriteLoc
from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool

from sglang_mx.attention.host_lengths import host_max

if TYPE_CHECKING:
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch

BACKEND_NAME = "mx_triton"


def _delegate_name(device: str) -> str:
    if not str(device).startswith("cuda"):
        return "torch_native"
    if torch.version.hip and os.environ.get("SGLANG_USE_AITER") == "1":
        return "aiter"
    return "triton"


class MxTritonAttnBackend(AttentionBackend):
    """Decode: sgl_kernel_rocm.attention.gqa_decode. Everything else: the delegate."""

    def __init__(self, model_runner: Any) -> None:
        super().__init__()
        self.delegate_name = _delegate_name(model_runner.device)
        self.delegate = ATTENTION_BACKENDS[self.delegate_name](model_runner)
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.swa_pool = isinstance(self.token_to_kv_pool, SWAKVPool)
        # The delegate writes prefill KV; decode must store/read with its scale convention.
        self.use_kv_scales = self.delegate_name != "torch_native"
        # The self-check (selfcheck/) runs gqa_decode at this model's shapes first; a failure
        # sends decode to the delegate as well and says why here.
        from sglang_mx.selfcheck.gate import gqa_declined

        self.kernel_declined = gqa_declined(model_runner, self.delegate_name)
        self.block_table: torch.Tensor | None = None
        self.seq_lens: torch.Tensor | None = None
        # Host int bounding this batch's lengths (None: plan for the pool's max context).
        self.max_seq_len: int | None = None
        # CUDA-graph state (init_cuda_graph_state): fixed-address buffers for max_bs rows.
        self.cuda_graph_block_table: torch.Tensor | None = None
        self.cuda_graph_seq_lens: torch.Tensor | None = None

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        """Eager path: one gather per batch, shared by every layer; no host sync."""
        self.delegate.init_forward_metadata(forward_batch)
        if forward_batch.forward_mode.is_decode():
            rows = self.req_to_token[forward_batch.req_pool_indices]
            self.block_table = rows.to(torch.int32)
            self.seq_lens = forward_batch.seq_lens.to(torch.int32)
            self.max_seq_len = host_max(getattr(forward_batch, "seq_lens_cpu", None))

    # ------------------------------------------------------------- CUDA graphs
    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int) -> None:
        device = self.req_to_token.device
        width = self.req_to_token.shape[1]
        self.cuda_graph_block_table = torch.zeros(max_bs, width, dtype=torch.int32, device=device)
        self.cuda_graph_seq_lens = torch.ones(max_bs, dtype=torch.int32, device=device)
        _maybe(self.delegate, "init_cuda_graph_state", max_bs, max_num_tokens)

    def get_cuda_graph_seq_len_fill_value(self) -> int:
        # Padded rows attend one token of row 0 (SGLang's padding slot): finite, unused.
        return 1

    def get_cpu_graph_seq_len_fill_value(self) -> int:
        # SGLang's DP-attention padding (ForwardBatch._pad_inputs_to_size) asks this on a CPU
        # device, and the CPU graph runner would: the same padded rows as under CUDA graphs.
        return self.get_cuda_graph_seq_len_fill_value()

    def init_forward_metadata_out_graph(
        self, forward_batch: ForwardBatch, in_capture: bool = False
    ) -> None:
        """Capture and replay: point decode at the fixed buffers' first bs rows."""
        _maybe(self.delegate, "init_forward_metadata_out_graph", forward_batch, in_capture)
        if not forward_batch.forward_mode.is_decode_or_idle():
            return
        if self.cuda_graph_block_table is None:
            raise RuntimeError("mx_triton: init_cuda_graph_state was not called")
        bs = forward_batch.batch_size
        if bs > self.cuda_graph_block_table.shape[0]:
            raise ValueError(
                f"batch {bs} exceeds the CUDA-graph buffers' max batch "
                f"{self.cuda_graph_block_table.shape[0]}"
            )
        self.block_table = self.cuda_graph_block_table[:bs]
        self.seq_lens = self.cuda_graph_seq_lens[:bs]
        # Launch shapes must not depend on this batch's lengths: plan for the max context.
        self.max_seq_len = None

    def init_forward_metadata_in_graph(self, forward_batch: ForwardBatch) -> None:
        """Recorded in the graph: refill the fixed buffers from the runner's static inputs."""
        _maybe(self.delegate, "init_forward_metadata_in_graph", forward_batch)
        if not forward_batch.forward_mode.is_decode_or_idle() or self.block_table is None:
            return
        torch.index_select(
            self.req_to_token, 0, forward_batch.req_pool_indices, out=self.block_table
        )
        self.seq_lens.copy_(forward_batch.seq_lens)

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kw):
        return self.delegate.forward_extend(q, k, v, layer, forward_batch, save_kv_cache, **kw)

    def _unsupported(self, layer) -> bool:
        return bool(
            self.swa_pool
            or layer.is_cross_attention
            or (layer.logit_cap is not None and layer.logit_cap > 0)
            or self.block_table is None
            or self.kernel_declined is not None
        )

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kw):
        if self._unsupported(layer):
            return self.delegate.forward_decode(q, k, v, layer, forward_batch, save_kv_cache, **kw)
        k_scale = layer.k_scale if self.use_kv_scales else None
        v_scale = layer.v_scale if self.use_kv_scales else None
        if save_kv_cache and k is not None and v is not None:
            self.token_to_kv_pool.set_kv_buffer(
                layer, KVWriteLoc(forward_batch.out_cache_loc, None), k, v, k_scale, v_scale
            )
        hq, hkv = layer.tp_q_head_num, layer.tp_k_head_num
        q3 = q.reshape(-1, hq, layer.qk_head_dim)
        k_buf = self.token_to_kv_pool.get_key_buffer(layer.layer_id)
        v_buf = self.token_to_kv_pool.get_value_buffer(layer.layer_id)
        window = layer.sliding_window_size
        o = gqa_decode(
            q3,
            k_buf.view(-1, 1, hkv, layer.qk_head_dim),
            v_buf.view(-1, 1, hkv, layer.v_head_dim),
            self.block_table,
            self.seq_lens,
            k_scale=k_scale,
            v_scale=v_scale,
            sm_scale=layer.scaling,
            sliding_window=window if window is not None and window > -1 else None,
            max_seq_len=self.max_seq_len,
        )
        return o.view(q3.shape[0], hq * layer.v_head_dim)

    def support_triton(self) -> bool:
        return True


def _maybe(delegate: Any, hook: str, *args: Any) -> None:
    """Forward a CUDA-graph hook to the delegate when it implements it (torch_native does not:
    no graphs on CPU). A delegate that cannot be captured fails only if a decode layer needs it."""
    fn = getattr(delegate, hook, None)
    if fn is None:
        return
    try:
        fn(*args)
    except NotImplementedError:
        pass


def create(runner: Any) -> MxTritonAttnBackend:
    """The backend for `runner`; GQA/MHA models only."""
    if runner.use_mla_backend:
        raise ValueError(
            f"--attention-backend {BACKEND_NAME} serves GQA/MHA models; MLA models (DeepSeek/"
            "GLM-5 family) are served by mx_dsa"
        )
    return MxTritonAttnBackend(runner)
