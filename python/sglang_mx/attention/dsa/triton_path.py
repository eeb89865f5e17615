"""The GPU decode path of the MLA/DSA backend: sgl_kernel_rocm's Triton kernels on SGLang's pools.

Page tables come from SGLang's token-level req_to_token rows: with page size P (64 for DSA) a
request's logical page i lives at slot req_to_token[r, i * P] // P, and the pools are viewed as
pages: latent [slots, 1, row] -> [pages, P, row] (row: the pool's LatentLayout, plain 576 values
or packed FP8 bytes); index keys through index_k_pages.IndexKLayout. Extend
batches stay on the torch path (sparse_math): these kernels are decode kernels.
"""

from __future__ import annotations

import torch
from sgl_kernel_rocm.attention import dsa_indexer_scores, dsa_sparse_decode, mla_decode, select_topk
from sgl_kernel_rocm.attention.latent_layout import LatentLayout

from sglang_mx.attention.dsa.index_k_pages import IndexKLayout


def block_table(
    req_to_token_rows: torch.Tensor, page: int, max_seq_len: int | None = None
) -> torch.Tensor:
    """int32 [B, max_pages] page ids from req_to_token rows [B, width]: enough pages for
    `max_seq_len` (a host int, e.g. the max of SGLang's seq_lens_cpu), or for the whole row
    without one. Built from shapes and host ints only: no host sync."""
    width = req_to_token_rows.shape[1]
    bound = width if max_seq_len is None else min(max(int(max_seq_len), 1), width)
    firsts = req_to_token_rows[:, : -(-bound // page) * page : page]
    return (firsts // page).to(torch.int32).contiguous()


def fill_block_table(
    out: torch.Tensor, req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, page: int
) -> None:
    """Write the page ids of requests `req_pool_indices` [B] into `out` [B, max_pages] in place
    (CUDA graphs: a fixed address, a shape set by the pool, so capturable); max_pages covers a
    whole req_to_token row."""
    firsts = torch.index_select(req_to_token[:, ::page], 0, req_pool_indices)
    if firsts.shape != out.shape:
        raise ValueError(f"block table {tuple(out.shape)} does not fit rows {tuple(firsts.shape)}")
    out.copy_(firsts.div(page, rounding_mode="floor"))


def max_pages(req_to_token: torch.Tensor, page: int) -> int:
    """Pages a block-table row needs to cover a whole req_to_token row."""
    return -(-req_to_token.shape[1] // page)


def paged_latent(kv_buf: torch.Tensor, page: int) -> torch.Tensor:
    """[slots, 1, D] -> [pages, page, D] (the pool holds size + page rows, a multiple of page)."""
    if kv_buf.shape[0] % page:
        raise ValueError(f"latent pool rows {kv_buf.shape[0]} are not a multiple of page {page}")
    return kv_buf.view(-1, page, kv_buf.shape[-1])


def index_topk_decode(
    q: torch.Tensor,
    weights: torch.Tensor,
    index_buf: torch.Tensor,
    index_k: IndexKLayout,
    table: torch.Tensor,
    seq_lens: torch.Tensor,
    top_k: int,
) -> torch.Tensor:
    """dsa_indexer_scores + select_topk: q [B, Hi, 128], weights [B, Hi] -> int32 [B, top_k]."""
    keys, scales = index_k.page_views(index_buf)
    scores = dsa_indexer_scores(
        q.float().contiguous(), weights.float().contiguous(), keys, scales, table, seq_lens
    )
    return select_topk(scores, seq_lens, top_k)


def mla_decode_paged(
    q: torch.Tensor,
    kv_buf: torch.Tensor,
    page: int,
    table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    topk_indices: torch.Tensor | None,
    layout: LatentLayout | None = None,
) -> torch.Tensor:
    """q [B, H, 576] -> [B, H, 512]: dense mla_decode, or dsa_sparse_decode over topk_indices,
    over rows in `layout` (the pool's: latent_cache.layout_of; default plain)."""
    cache = paged_latent(kv_buf, page)
    # fp32 queries make the kernel upcast the (bf16) cache rows: no rounding of q.
    q_k = q.contiguous()
    if topk_indices is None:
        out = mla_decode(q_k, cache, table, seq_lens, sm_scale=scale, layout=layout)
    else:
        out = dsa_sparse_decode(
            q_k, cache, table, seq_lens, topk_indices.contiguous(), sm_scale=scale, layout=layout
        )
    return out
