"""DSA (DeepSeek Sparse Attention) decode: MLA over a per-request list of top-k token positions.

indices [B, K] (int32, K = 2,048 for GLM-5) are logical positions within each request, mapped to
the paged latent cache through block_table. Entries < 0 or >= seq_len are skipped (so a list may
hold fewer valid entries than K); duplicates are attended as often as they are listed, exactly
like the gather in the reference. Kernel and launcher: mla_decode (its `indices` path).

The float64 reference `dsa_sparse_decode_ref` is in reference.py.
"""

from __future__ import annotations

from typing import Any

import torch

from sgl_kernel_rocm.attention.mla_decode import mla_decode


def dsa_sparse_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    indices: torch.Tensor,
    **options: Any,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Sparse absorbed-MLA decode of q [B, H, 512+64] over `indices` [B, K] -> [B, H, 512].

    `options` are mla_decode's keywords (kv_scale, sm_scale, num_splits, out, return_lse,
    max_seq_len). No host sync; the split plan uses K (and `max_seq_len` when shorter)."""
    if indices.dim() != 2 or indices.shape[0] != q.shape[0]:
        raise ValueError(f"indices must be [batch={q.shape[0]}, top_k], got {tuple(indices.shape)}")
    if indices.dtype not in (torch.int32, torch.int64) or indices.stride(-1) != 1:
        raise ValueError("indices must be a contiguous int32/int64 tensor")
    return mla_decode(q, kv_cache, block_table, seq_lens, indices=indices, **options)
