"""The mx_dsa decode cases: MLA dense decode, DSA sparse decode and the DSA indexer, called as
attention/dsa/triton_path.py calls them (the latent pool [slots, 1, row] viewed as pages, the FP8
index-key pool as SGLang's uint8 pages of keys then scales, the same keywords), over caches made
on the target device, against sgl_kernel_rocm's float64 references. (This package sits below
attention/, which calls the gate, so the cases name the kernels, not triton_path.)"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sglang_mx.selfcheck.tolerance import ToleranceVerdict, bf16_close, scores_close, topk_selection

BATCH_SHORT = 7  # the second request's length: a partial first page


@dataclass(frozen=True)
class MlaShape:
    heads: int  # query heads of this rank
    d_lat: int  # kv_lora_rank (512)
    d_rope: int  # qk_rope_head_dim (64)
    page: int  # the latent pool's page size (64 for DSA)
    kv_dtype: torch.dtype  # the pool's KV dtype
    packed: bool  # SGLang's packed FP8 rows (dsa_kv_cache_store_fp8)
    q_dtype: torch.dtype  # the model dtype
    sm_scale: float
    context: int  # the longer request's cached tokens

    def describe(self) -> str:
        kv = str(self.kv_dtype).removeprefix("torch.") + (" packed" if self.packed else "")
        q = str(self.q_dtype).removeprefix("torch.")
        return (
            f"H{self.heads} D{self.d_lat}+{self.d_rope} page {self.page} kv {kv} q {q} "
            f"ctx {self.context}"
        )


@dataclass(frozen=True)
class IndexerShape:
    heads: int  # index_n_heads
    dim: int  # index_head_dim (128)
    page: int  # the index-key pool's page size
    top_k: int  # index_topk
    q_dtype: torch.dtype
    context: int

    def describe(self) -> str:
        q = str(self.q_dtype).removeprefix("torch.")
        return (
            f"Hi{self.heads} D{self.dim} page {self.page} top{self.top_k} q {q} ctx {self.context}"
        )


def _lens(context: int) -> list[int]:
    return [context, min(context, BATCH_SHORT)]


def _table(g: torch.Generator, lens: list[int], page: int, device) -> tuple[torch.Tensor, int]:
    """int32 [B, pages] of distinct pages scattered over a pool (page 0 unused, as SGLang's
    padding page), and the pool's page count."""
    width = -(-max(lens) // page)
    pool = len(lens) * width + 1
    ids = torch.randperm(pool - 1, generator=g)[: len(lens) * width] + 1
    return ids.view(len(lens), width).to(torch.int32).to(device), pool


def _latent(g: torch.Generator, shape: MlaShape, slots: int, device):
    """The pool's latent buffer [slots, 1, row] in its layout, and the layout to pass (None:
    plain rows, which every version of the kernels reads without one)."""
    values = torch.randn(slots, 1, shape.d_lat + shape.d_rope, generator=g).to(device)
    if not shape.packed:
        return values.to(shape.kv_dtype), None
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout

    layout = LatentLayout.packed_fp8(shape.d_lat, shape.d_rope)
    return layout.pack(values), layout


def check_mla(shape: MlaShape, device, top_k: int | None = None) -> ToleranceVerdict:
    """Dense MLA decode (top_k None) or DSA sparse decode over `top_k` listed positions."""
    from sgl_kernel_rocm import attention as kernels

    g = torch.Generator().manual_seed(1 if top_k is None else 2)
    lens = _lens(shape.context)
    table, pages = _table(g, lens, shape.page, device)
    kv_buf, layout = _latent(g, shape, pages * shape.page, device)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    q = torch.randn(len(lens), shape.heads, shape.d_lat + shape.d_rope, generator=g)
    q = q.to(device=device, dtype=shape.q_dtype)
    indices = None
    if top_k is not None:
        # Positions over the whole context, -1s and out-of-range ones among them.
        indices = torch.randint(-1, shape.context + 1, (len(lens), top_k), generator=g)
        indices = indices.to(device=device, dtype=torch.int32)
    cache = kv_buf.view(-1, shape.page, kv_buf.shape[-1])  # triton_path.paged_latent
    opts = {"sm_scale": shape.sm_scale} | ({"layout": layout} if layout else {})
    if indices is None:
        out = kernels.mla_decode(q, cache, table, seq_lens, **opts)
    else:
        out = kernels.dsa_sparse_decode(q, cache, table, seq_lens, indices, **opts)
    ref = kernels.mla_decode_ref(q, cache, table, seq_lens, indices=indices, **opts)
    if out.shape != ref.shape:
        return ToleranceVerdict(
            False, float("nan"), 0.0, f"output {tuple(out.shape)} != {ref.shape}"
        )
    return bf16_close(out, ref)


def index_key_pages(g: torch.Generator, pages: int, page: int, dim: int, device):
    """SGLang's FP8 index-key pool [pages, page * (dim + 4)] uint8 (per page: the keys, then
    one fp32 scale per key) with random keys, viewed as attention/dsa/index_k_pages.py's
    IndexKLayout.page_views views it: (keys FP8 [pages, page, dim], scales fp32 [pages, page]),
    strided as served."""
    keys = torch.randn(pages, page, dim, generator=g)
    # Power-of-two scales bringing each key's amax under 448, as SGLang's ue8m0 act_quant.
    scale = torch.exp2(torch.ceil(torch.log2(keys.abs().amax(-1) / 448.0)))
    codes = (keys / scale.unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8)
    buf = torch.cat([codes.view(pages, -1), scale.view(torch.uint8).view(pages, -1)], dim=1)
    buf = buf.to(device)
    k = buf[:, : page * dim].view(torch.float8_e4m3fn).view(pages, page, dim)
    return k, buf[:, page * dim :].view(torch.float32)


def check_indexer(shape: IndexerShape, device) -> ToleranceVerdict:
    """The indexer's scores kernel against its float64 reference, then the top-k selected from
    them (triton_path.index_topk_decode's select_topk) judged on the reference scores."""
    from sgl_kernel_rocm import attention as kernels

    g = torch.Generator().manual_seed(3)
    lens = _lens(shape.context)
    table, pages = _table(g, lens, shape.page, device)
    k, k_scale = index_key_pages(g, pages, shape.page, shape.dim, device)
    q = torch.randn(len(lens), shape.heads, shape.dim, generator=g).to(device, shape.q_dtype)
    w = (torch.randn(len(lens), shape.heads, generator=g) * shape.dim**-0.5).to(device)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    tensors = (q.float().contiguous(), w.float().contiguous(), k, k_scale, table, seq_lens)
    ref = kernels.dsa_indexer_scores_ref(*tensors)
    # As served: no host max length (the block table's capacity), -inf past each length.
    scores = kernels.dsa_indexer_scores(*tensors)
    verdict = scores_close(scores[:, : ref.shape[1]], ref)
    if verdict.ok and not torch.isinf(scores[:, ref.shape[1] :]).all():
        verdict = ToleranceVerdict(
            False, float("nan"), 0.0, "scores past the longest request not -inf"
        )
    if not verdict.ok:
        return verdict
    idx = kernels.select_topk(scores, seq_lens, shape.top_k)
    if tuple(idx.shape) != (len(lens), shape.top_k):
        return ToleranceVerdict(False, float("nan"), 0.0, f"top-k {tuple(idx.shape)} wrong shape")
    chosen = topk_selection(idx, ref, lens, shape.top_k)
    return chosen if not chosen.ok else verdict
