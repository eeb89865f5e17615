"""DSA lightning indexer for decode: score every cached token, then pick the top-k positions.

score[b, t] = k_scale[t] * sum_h w[b, h] * relu(q[b, h] . k[t]) with 32 heads x 128 dims
(GLM-5), index keys in a paged FP8 e4m3 cache [num_pages, page_size, 128] with one fp32 scale
per token [num_pages, page_size]; w carries the head weights and softmax scale. Scoring is a
Triton kernel; top-k selection is torch.topk over the scores, or a Triton radix select
(topk_radix.py, `select="radix"`). Output positions are logical (what dsa_decode takes), -1
padded when seq_len < k.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from sgl_kernel_rocm.attention._common import (
    check_block_table,
    context_bound,
    launch_options,
    next_pow2,
    resolve_config,
)

MAX_TILES_PER_PROG = 64


@triton.jit
def _indexer_score_kernel(
    Q,
    W,
    K,
    KS,
    BT,
    SEQ,
    OUT,
    num_heads,
    tiles_per_prog,
    stride_qb,
    stride_qh,
    stride_wb,
    stride_kp,
    stride_kt,
    stride_ksp,
    stride_kst,
    stride_btb,
    stride_ob,
    PAGE: tl.constexpr,
    D: tl.constexpr,
    BLOCK_HI: tl.constexpr,
    BLOCK_N: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # One program scores `tiles_per_prog` consecutive BLOCK_N-key tiles of one request: the
    # query heads, head weights and row pointers are loaded once and the loop streams keys.
    b = tl.program_id(0)
    chunk = tl.program_id(1)
    seq_len = tl.load(SEQ + b).to(tl.int32)
    offs_h = tl.arange(0, BLOCK_HI)
    offs_d = tl.arange(0, D)
    h_mask = offs_h < num_heads
    q = tl.load(
        Q + b.to(tl.int64) * stride_qb + offs_h[:, None] * stride_qh + offs_d[None, :],
        mask=h_mask[:, None],
        other=0.0,
    )
    if UPCAST:
        # The interpreter's bf16 tl.dot is wrong (triton #11584): do the math in fp32.
        q = q.to(tl.float32)
    w = tl.load(W + b.to(tl.int64) * stride_wb + offs_h, mask=h_mask, other=0.0).to(tl.float32)
    bt_row = BT + b.to(tl.int64) * stride_btb
    out_row = OUT + b.to(tl.int64) * stride_ob
    n_start = chunk * tiles_per_prog * BLOCK_N
    for n0 in range(n_start, n_start + tiles_per_prog * BLOCK_N, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        in_row = offs_n < stride_ob  # the score row is never wider than the block table
        n_mask = (offs_n < seq_len) & in_row
        if PAGE % BLOCK_N == 0:
            # The tile lies in one page: one page-id load, then its keys and scales are
            # contiguous runs (no per-key block-table gather).
            live = n0 < tl.minimum(seq_len, stride_ob)
            page = tl.load(bt_row + n0 // PAGE, mask=live, other=0).to(tl.int64)
        else:
            page = tl.load(bt_row + offs_n // PAGE, mask=n_mask, other=0).to(tl.int64)
        slot = offs_n % PAGE
        k = tl.load(  # stream: kv
            K + (page * stride_kp + slot * stride_kt)[:, None] + offs_d[None, :],
            mask=n_mask[:, None],
            other=0.0,
        )
        k_scale = tl.load(KS + page * stride_ksp + slot * stride_kst, mask=n_mask, other=0.0)
        s = tl.dot(q, tl.trans(k.to(q.dtype)))
        score = tl.sum(tl.maximum(s, 0.0) * w[:, None], 0) * k_scale
        score = tl.where(n_mask, score, float("-inf"))
        tl.store(out_row + offs_n, score, mask=in_row)


def _as_paged_keys(k_cache: torch.Tensor, k_scale: torch.Tensor):
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
    k_cache, k_scale = _as_paged_keys(k_cache, k_scale)
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


# ----------------------------------------------------------------------------- reference


def dsa_indexer_scores_ref(*tensors: torch.Tensor) -> torch.Tensor:
    """Float64 reference of dsa_indexer_scores, over its tensors (q, weights, k_cache, k_scale,
    block_table, seq_lens); width max(seq_lens)."""
    q, weights, k_cache, k_scale, block_table, seq_lens = tensors
    k_cache, k_scale = _as_paged_keys(k_cache, k_scale)
    page = k_cache.shape[1]
    max_len = int(seq_lens.max())
    out = torch.full((q.shape[0], max_len), float("-inf"), dtype=torch.float64)
    for b in range(q.shape[0]):
        pos = torch.arange(int(seq_lens[b]))
        pages = block_table[b, pos // page].long()
        k = k_cache[pages, pos % page].double() * k_scale[pages, pos % page].double()[:, None]
        s = torch.relu(q[b].double() @ k.T)  # [Hi, n]
        out[b, : pos.numel()] = (weights[b].double()[:, None] * s).sum(0)
    return out
