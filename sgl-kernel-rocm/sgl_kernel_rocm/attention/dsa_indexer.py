"""DSA lightning indexer for decode: score every cached token, then pick the top-k positions.

score[b, t] = k_scale[t] * sum_h w[b, h] * relu(q[b, h] . k[t]) with 32 heads x 128 dims
(GLM-5), index keys in a paged FP8 e4m3 cache [num_pages, page_size, 128] with one fp32 scale
per token [num_pages, page_size]; w carries the head weights and softmax scale. Scoring is a
Triton kernel; top-k selection is torch.topk over the scores, or a Triton radix select
(topk_radix.py, `select="radix"`). Output positions are logical (what dsa_decode takes), -1
padded when seq_len < k.

The public wrappers; the scoring kernel's Triton body is _dsa_indexer_kernels.py, the float64
reference `dsa_indexer_scores_ref` is in reference.py.
"""

from __future__ import annotations

import torch
import triton

from sgl_kernel_rocm.attention._common import (
    check_block_table,
    context_bound,
    launch_options,
    next_pow2,
    resolve_config,
)
from sgl_kernel_rocm.attention._dsa_indexer_kernels import _indexer_score_kernel

MAX_TILES_PER_PROG = 64


def as_paged_keys(k_cache: torch.Tensor, k_scale: torch.Tensor):
    """A token pool [num_tokens, D] (scales [num_tokens]) is pages of one token."""
    if k_cache.dim() == 2:
        return k_cache.unsqueeze(1), k_scale.reshape(-1, 1)
    return k_cache, k_scale


def dsa_indexer_scores(
    q: torch.Tensor,
    weights: torch.Tensor,
    k_cache: torch.Tensor,
    k_scale: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    max_len: int | None = None,
) -> torch.Tensor:
    """Index scores [B, L] (fp32; -inf past each seq_len) for q [B, Hi, 128].

    L = `max_len` (a host int >= every seq_lens entry, e.g. max of SGLang's seq_lens_cpu) or,
    without it, the block table's capacity (row width x page size): no host sync either way.
    """
    k_cache, k_scale = as_paged_keys(k_cache, k_scale)
    batch, hi, d = q.shape
    _, page_size, dk = k_cache.shape
    if dk != d or d != next_pow2(d) or weights.shape != (batch, hi):
        raise ValueError(
            f"q {tuple(q.shape)}, weights {tuple(weights.shape)} and k_cache "
            f"{tuple(k_cache.shape)} do not agree (want [B,Hi,D], [B,Hi], [..,D])"
        )
    if k_scale.shape != k_cache.shape[:2]:
        raise ValueError(f"k_scale must be [num_pages, page_size], got {tuple(k_scale.shape)}")
    check_block_table(block_table, seq_lens, page_size)
    max_len = context_bound(block_table, page_size, max_len) if batch else 0
    cfg = resolve_config("decode_dsa_indexer", batch, f"hi{hi}_d{d}")
    out = torch.empty(batch, max(max_len, 1), dtype=torch.float32, device=q.device)
    block_n = int(cfg["BLOCK_N"])
    tiles = triton.cdiv(max_len, block_n)
    # Enough programs to fill the chip, each looping over as many tiles as that leaves (setup
    # paid once per program, not per 64 keys); shapes only, so CUDA-graph capturable.
    per_prog = batch * tiles // int(cfg["target_programs"])
    per_prog = max(1, min(MAX_TILES_PER_PROG, tiles, per_prog))
    if batch and max_len:
        _indexer_score_kernel[(batch, triton.cdiv(tiles, per_prog))](
            q,
            weights,
            k_cache,
            k_scale,
            block_table,
            seq_lens,
            out,
            hi,
            per_prog,
            *q.stride()[:2],
            weights.stride(0),
            k_cache.stride(0),
            k_cache.stride(1),
            k_scale.stride(0),
            k_scale.stride(1),
            block_table.stride(0),
            out.stride(0),
            PAGE=page_size,
            D=d,
            BLOCK_HI=max(16, next_pow2(hi)),
            BLOCK_N=block_n,
            **launch_options(cfg, q),
        )
    return out[:, :max_len]


def select_topk(scores: torch.Tensor, seq_lens: torch.Tensor, k: int) -> torch.Tensor:
    """Top-k positions per row of scores [B, L] -> int32 [B, k], -1 where seq_len < k."""
    batch, length = scores.shape
    idx = torch.full((batch, k), -1, dtype=torch.int32, device=scores.device)
    take = min(k, length)
    if take == 0:
        return idx
    vals, pos = torch.topk(scores, take, dim=1)
    pos = torch.where(torch.isfinite(vals), pos, torch.full_like(pos, -1))
    idx[:, :take] = pos.to(torch.int32)
    return idx


def dsa_indexer(
    *tensors: torch.Tensor,
    top_k: int = 2048,
    max_seq_len: int | None = None,
    select: str = "torch",
) -> torch.Tensor:
    """Top-k token positions [B, top_k] (int32, -1 padded) for the sparse decode, from
    dsa_indexer_scores's tensors (q, weights, k_cache, k_scale, block_table, seq_lens); no host
    sync (`max_seq_len` as its `max_len`). `select`: "torch" (torch.topk, positions by score)
    or "radix" (topk_radix.py on the device, positions in ascending order per tier)."""
    if select not in ("torch", "radix"):
        raise ValueError(f"select must be 'torch' or 'radix', got {select!r}")
    scores = dsa_indexer_scores(*tensors, max_len=max_seq_len)
    if select == "radix":
        from sgl_kernel_rocm.attention.topk_radix import select_topk_radix

        return select_topk_radix(scores, tensors[-1], top_k)
    return select_topk(scores, tensors[-1], top_k)
