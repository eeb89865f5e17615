"""SGLang attention backend `mx_dsa`: MLA with DeepSeek Sparse Attention (GLM-5, DeepSeek-V3.2).

SGLang 0.5.23 serves DSA models only through GPU kernels (its `dsa` backend). This backend
covers them wherever the plugin runs: prefill, extend over a radix-cache prefix, chunked prefill,
mixed prefill+decode batches and decode, over SGLang's own pools -- the paged latent cache of
`DSATokenToKVPool` (page 64) and its FP8 index-key pages (index_k_pages). The math is torch
(sparse_math) on CPU; on a GPU, decode runs sgl_kernel_rocm's Triton MLA/DSA/indexer kernels
(triton_path) with no host sync (the block table is sized from SGLang's host seq_lens_cpu), and
extend stays on torch (no kernel of ours is an extend kernel).
CUDA graphs (SGLang 0.5.23's hooks, decode only, as mx_triton): init_cuda_graph_state allocates
a block table [max_bs, pages of a whole req_to_token row] and seq_lens [max_bs] once;
init_forward_metadata_out_graph (before capture and each replay) points decode at their first
bs rows; init_forward_metadata_in_graph (recorded in the graph) refills them from the runner's
static req_pool_indices / seq_lens. Launch shapes then depend on bs and the pool only, and the
indexer's top-k (scores over the whole row's capacity, -inf past each length, torch.topk) stays
on the device. Target verify / draft extend under graphs are refused with a message.
Model side: DeepseekV2AttentionMLA asks `AttentionBackendRegistry` (models/deepseek_common) how
to run; our handler always answers MLA (absorbed), so attention gets q = [q_nope W_UK | q_pe]
[T, H, 576], k = [c_kv | k_pe] and `topk_indices` from the indexer (indexer_forward_native,
which finds this backend and the pool through SGLang's forward_context accessors; GLM-5.2
shares one top-k with the next layer).

SGLang-private access (0.5.23): ModelRunner.req_to_token_pool /
token_to_kv_pool / device / page_size, ForwardBatch fields (req_pool_indices, seq_lens_cpu,
extend_seq_lens_cpu, out_cache_loc, forward_mode, batch_size), MLATokenToKVPool.set_kv_buffer /
get_key_buffer, DSATokenToKVPool.get_index_k_with_scale_buffer / index_page_size, RadixAttention
fields (layer_id, tp_q_head_num, v_head_dim, scaling). The version is checked when the backend is
registered (`attention/registry.py`); this module is imported only when a runner creates the
backend.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from sglang.srt.layers.attention.base_attn_backend import AttentionBackend

from sglang_mx.attention.dsa import indexer, latent_cache, sparse_math
from sglang_mx.attention.dsa.index_k_pages import IndexKLayout
from sglang_mx.attention.dsa.name import MX_DSA
from sglang_mx.attention.dsa.pool_layouts import PoolLayouts
from sglang_mx.attention.host_lengths import host_max

BACKEND_NAME = MX_DSA
# Force the Triton decode kernels (on a CPU: through TRITON_INTERPRET=1), for tests.
FORCE_TRITON_ENV = "SGLANG_MX_DSA_TRITON"


def _use_triton(device: Any) -> bool:
    return str(device).startswith("cuda") or os.environ.get(FORCE_TRITON_ENV) == "1"


def requests_of(forward_batch: Any, req_to_token: torch.Tensor) -> list[sparse_math.Request]:
    """The batch as requests (new tokens at the end of each request's cached tokens): decode,
    extend (prefill, radix prefix, chunked, mixed) and EAGLE's target-verify / draft-extend."""
    seq_lens = forward_batch.seq_lens_cpu
    if seq_lens is None:
        seq_lens = forward_batch.seq_lens.cpu()
    seq_lens = [int(n) for n in seq_lens.tolist()]
    mode = forward_batch.forward_mode
    if mode.is_decode_or_idle():
        extends = [1] * len(seq_lens)
    elif mode.is_target_verify():
        # EAGLE verify: each request's draft tokens (a chain at topk 1) follow its committed
        # seq_len; their KV slots are already in req_to_token (SGLang's prepare_for_verify).
        drafts = int(forward_batch.input_ids.shape[0]) // max(len(seq_lens), 1)
        extends = [drafts] * len(seq_lens)
        seq_lens = [n + drafts for n in seq_lens]
    else:  # extend, and EAGLE's draft extend (seq_lens already count the new tokens)
        extends = [int(n) for n in forward_batch.extend_seq_lens_cpu]
    rows = forward_batch.req_pool_indices.tolist()
    out, start = [], 0
    for row, n, e in zip(rows, seq_lens, extends, strict=True):
        out.append(sparse_math.Request(start, e, n, req_to_token[row, :n].long()))
        start += e
    return out


class MxDsaAttnBackend(AttentionBackend):
    """MLA (+ DSA top-k) over SGLang's paged latent and FP8 index-key pools."""

    def __init__(self, model_runner: Any) -> None:
        super().__init__()
        self.device = model_runner.device
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.page_size = int(model_runner.page_size)
        self.kv_lora_rank = int(self.token_to_kv_pool.kv_lora_rank)
        # The self-check (selfcheck/) runs our decode kernels at this model's shapes first; a
        # failure leaves decode on the torch path and says why here.
        self.kernels_declined = None
        if _use_triton(self.device):
            from sglang_mx.selfcheck.gate import dsa_declined

            self.kernels_declined = dsa_declined(model_runner)
        self.use_triton = _use_triton(self.device) and self.kernels_declined is None
        self.requests: list[sparse_math.Request] = []
        # Decode on the kernels: page table and lengths (None: the torch path, over requests).
        self.table: torch.Tensor | None = None
        self.seq_lens: torch.Tensor | None = None
        # CUDA-graph state (init_cuda_graph_state): fixed-address buffers for max_bs rows.
        self.cuda_graph_table: torch.Tensor | None = None
        self.cuda_graph_seq_lens: torch.Tensor | None = None
        # The pool's latent and index-key layouts, resolved once (not per layer per step).
        self._layouts: PoolLayouts | None = None

    def layouts(self) -> PoolLayouts:
        """The layouts of the pool this backend serves, resolved the first time it is seen."""
        pool = self.token_to_kv_pool
        if self._layouts is None or self._layouts.pool is not pool:
            self._layouts = PoolLayouts(pool, self.page_size)
        return self._layouts

    def index_k_layout(self) -> IndexKLayout:
        """The index-key pages' layout (what the indexer stores its keys in)."""
        return self.layouts().index_k

    def init_forward_metadata(self, forward_batch: Any) -> None:
        """Eager path. Kernel decode reads no device value on the host (no per-request list)."""
        mode = forward_batch.forward_mode
        self.table = self.seq_lens = None
        self.requests = []
        if mode.is_idle():
            return
        if self.use_triton and mode.is_decode():
            from sglang_mx.attention.dsa import triton_path

            self.seq_lens = forward_batch.seq_lens.to(torch.int32)
            rows = self.req_to_token[forward_batch.req_pool_indices]
            bound = host_max(getattr(forward_batch, "seq_lens_cpu", None))
            self.table = triton_path.block_table(rows, self.page_size, bound)
            return
        self.requests = requests_of(forward_batch, self.req_to_token)

    # -- CUDA graphs (decode) -------------------------------------------------------------

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int) -> None:
        if self.kernels_declined:
            raise RuntimeError(
                f"--attention-backend {BACKEND_NAME}: {self.kernels_declined}; its torch decode "
                "path cannot be captured: launch with --disable-cuda-graph"
            )
        from sglang_mx.attention.dsa import triton_path

        device = self.req_to_token.device
        pages = triton_path.max_pages(self.req_to_token, self.page_size)
        self.cuda_graph_table = torch.zeros(max_bs, pages, dtype=torch.int32, device=device)
        self.cuda_graph_seq_lens = torch.ones(max_bs, dtype=torch.int32, device=device)

    def get_cuda_graph_seq_len_fill_value(self) -> int:
        # Padded rows (req_to_token row 0, SGLang's padding row) attend one token: finite, unused.
        return 1

    def get_cpu_graph_seq_len_fill_value(self) -> int:
        # SGLang's DP-attention padding (ForwardBatch._pad_inputs_to_size) asks this on a CPU
        # device, and the CPU graph runner would: the same padded rows as under CUDA graphs.
        return self.get_cuda_graph_seq_len_fill_value()

    def init_forward_metadata_out_graph(self, forward_batch: Any, in_capture: bool = False):
        """Capture and replay: point decode at the fixed buffers' first bs rows."""
        mode = forward_batch.forward_mode
        if not mode.is_decode_or_idle():
            raise RuntimeError(
                f"--attention-backend {BACKEND_NAME} captures CUDA graphs for decode only, not "
                f"{mode.name} (speculative decoding); launch with --disable-cuda-graph"
            )
        if self.cuda_graph_table is None:
            raise RuntimeError(f"{BACKEND_NAME}: init_cuda_graph_state was not called")
        bs = forward_batch.batch_size
        if bs > self.cuda_graph_table.shape[0]:
            raise ValueError(
                f"batch {bs} exceeds the CUDA-graph buffers' max batch "
                f"{self.cuda_graph_table.shape[0]}"
            )
        self.requests = []
        self.table = self.cuda_graph_table[:bs]
        self.seq_lens = self.cuda_graph_seq_lens[:bs]

    def init_forward_metadata_in_graph(self, forward_batch: Any) -> None:
        """Recorded in the graph: refill the fixed buffers from the runner's static inputs."""
        if not forward_batch.forward_mode.is_decode_or_idle() or self.table is None:
            return
        from sglang_mx.attention.dsa import triton_path

        triton_path.fill_block_table(
            self.table, self.req_to_token, forward_batch.req_pool_indices, self.page_size
        )
        self.seq_lens.copy_(forward_batch.seq_lens)

    # -- indexer (called by indexer_forward_native) --------------------------------------

    def index_topk(self, query, weights, index_buf, forward_batch, top_k: int):
        index_k = self.index_k_layout()
        if self.table is not None:
            from sglang_mx.attention.dsa import triton_path

            return triton_path.index_topk_decode(
                query, weights, index_buf, index_k, self.table, self.seq_lens, top_k
            )
        return sparse_math.index_topk(query, weights, index_buf, index_k, self.requests, top_k)

    # -- attention ----------------------------------------------------------------------

    def _attend(self, q, k, v, layer, forward_batch, save_kv_cache, topk_indices):
        # The pool's latent rows in the layout SGLang chose (plain, or packed FP8 under
        # --kv-cache-dtype fp8_e4m3 off HIP), written through SGLang's own path.
        pool = self.token_to_kv_pool
        layout = self.layouts().latent
        if save_kv_cache and k is not None:
            latent_cache.write(pool, layer, forward_batch.out_cache_loc, k, v)
        heads = layer.tp_q_head_num
        q3 = q.reshape(q.shape[0], heads, -1)
        kv_buf = pool.get_key_buffer(layer.layer_id)
        if self.table is not None:
            from sglang_mx.attention.dsa import triton_path

            o = triton_path.mla_decode_paged(
                q3,
                kv_buf,
                self.page_size,
                self.table,
                self.seq_lens,
                layer.scaling,
                topk_indices,
                layout,
            )
        else:
            o = sparse_math.mla_attend(
                q3, kv_buf, self.requests, layer.scaling, self.kv_lora_rank, topk_indices, layout
            )
        return o.reshape(q.shape[0], heads * self.kv_lora_rank)

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kw):
        return self._attend(q, k, v, layer, forward_batch, save_kv_cache, kw.get("topk_indices"))

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kw):
        return self._attend(q, k, v, layer, forward_batch, save_kv_cache, kw.get("topk_indices"))

    def support_triton(self) -> bool:
        return True


def _handle_mla(attn: Any, forward_batch: Any) -> Any:
    """AttentionBackendRegistry handler: always the absorbed MLA path (no MHA prefill)."""
    from sglang.srt.models.deepseek_common.attention_forward_methods.forward_methods import (
        AttnForwardMethod,
    )

    return AttnForwardMethod.MLA


def create(runner: Any) -> MxDsaAttnBackend:
    """The backend for `runner` (MLA models only); tells SGLang's DeepSeek-family dispatch
    registry and the DSA indexer about it."""
    if not runner.use_mla_backend:
        raise ValueError(
            f"--attention-backend {BACKEND_NAME} serves MLA models (DeepSeek/GLM-5 family); "
            "use mx_triton or torch_native for GQA/MHA models"
        )
    from sglang.srt.models.deepseek_common.attention_backend_handler import (
        AttentionBackendRegistry,
    )

    AttentionBackendRegistry.register(BACKEND_NAME, _handle_mla)
    indexer.register()
    if not str(runner.device).startswith("cpu"):
        indexer.route_gpu_indexer()
    return MxDsaAttnBackend(runner)
