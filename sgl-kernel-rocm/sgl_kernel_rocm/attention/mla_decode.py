"""Paged MLA decode in absorbed form (GLM-5 / DeepSeek shapes), dense or top-k sparse.

Queries arrive already projected into the latent space: q [B, H, 576] = 512 latent dims (q_nope
times W_UK) then 64 rope dims. The cache holds one shared entry per token, [num_pages,
page_size, 576] (latent c_kv then k_pe), bf16 or FP8 e4m3 with one per-tensor dequant scale.
Scores are q_lat.c + q_pe.k_pe; values are the latent c itself, so the output is [B, H, 512]
in latent space (the caller applies W_UV). Split-KV partials merge in reduce.merge_splits.
One program holds up to BLOCK_H heads (the rank's heads rounded up to a power of two, at least
16 for the MMA, capped by the arch table's BLOCK_H and MAX_BLOCK_H): with all heads in one
program each latent tile is read from memory once per request and split, not once per 16-head
block; the [BLOCK_H, 512] fp32 accumulator is spread over the program's warps by Triton's
layout.
The same kernel serves DSA sparse decode (SPARSE=True): keys come from a per-request list of
token positions instead of the whole context (see dsa_decode.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from sgl_kernel_rocm.attention._common import (
    LN2,
    LOG2E,
    check_block_table,
    check_splits,
    context_bound,
    interpreting,
    next_pow2,
    plan_splits,
    resolve_config,
    scale_vector,
)
from sgl_kernel_rocm.attention.reduce import merge_splits

KV_LORA_RANK = 512
ROPE_DIM = 64


@triton.jit
def _mla_decode_split_kernel(
    Q,
    KV,
    BT,
    SEQ,
    IDX,
    O_PART,
    LSE_PART,
    KV_SCALE,
    qk_scale_log2,
    seq_cap,
    num_heads,
    num_idx,
    num_splits,
    stride_qb,
    stride_qh,
    stride_kvp,
    stride_kvt,
    stride_btb,
    stride_ib,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
    PAGE: tl.constexpr,
    D_LAT: tl.constexpr,
    D_ROPE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPARSE: tl.constexpr,
    UPCAST: tl.constexpr,
):
    b = tl.program_id(0)
    hb = tl.program_id(1)
    split = tl.program_id(2)
    # seq_cap = what a block-table row addresses: a bad length cannot read past the row.
    seq_len = tl.minimum(tl.load(SEQ + b).to(tl.int32), seq_cap)
    # Dense: iterate context positions; sparse: iterate slots of the index list.
    n_items = num_idx if SPARSE else seq_len
    per_split = tl.cdiv(n_items, num_splits)
    lo = split * per_split
    hi = tl.minimum(lo + per_split, n_items)

    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = heads < num_heads
    offs_l = tl.arange(0, D_LAT)
    offs_r = tl.arange(0, D_ROPE)
    q_row = Q + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh
    q_lat = tl.load(q_row + offs_l[None, :], mask=h_mask[:, None], other=0.0)
    q_pe = tl.load(q_row + D_LAT + offs_r[None, :], mask=h_mask[:, None], other=0.0)
    if UPCAST:
        # The interpreter's bf16 tl.dot is wrong (triton #11584): do the math in fp32.
        q_lat = q_lat.to(tl.float32)
        q_pe = q_pe.to(tl.float32)
    kv_scale = tl.load(KV_SCALE)
    score_scale = qk_scale_log2 * kv_scale

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D_LAT], tl.float32)
    bt_row = BT + b.to(tl.int64) * stride_btb
    for n0 in range(lo, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_mask = offs_n < hi
        if SPARSE:
            pos = tl.load(IDX + b.to(tl.int64) * stride_ib + offs_n, mask=n_mask, other=-1)
            n_mask = n_mask & (pos >= 0) & (pos < seq_len)
        else:
            pos = offs_n
        page = tl.load(bt_row + pos // PAGE, mask=n_mask, other=0).to(tl.int64)
        row = KV + page * stride_kvp + (pos % PAGE) * stride_kvt
        c = tl.load(  # stream: kv
            row[:, None] + offs_l[None, :], mask=n_mask[:, None], other=0.0
        )
        k_pe = tl.load(  # stream: kv_rope
            row[:, None] + D_LAT + offs_r[None, :], mask=n_mask[:, None], other=0.0
        )
        c = c.to(q_lat.dtype)
        qk = tl.dot(q_lat, tl.trans(c)) + tl.dot(q_pe, tl.trans(k_pe.to(q_pe.dtype)))
        qk = tl.where(n_mask[None, :], qk * score_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        # A sparse tile can be fully masked; keep exp2 away from (-inf) - (-inf).
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(qk - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c)
        m_i = m_new

    has = l_i > 0
    out = acc * (kv_scale / tl.where(has, l_i, 1.0))[:, None]
    o_ptrs = (
        O_PART
        + b.to(tl.int64) * stride_ob
        + heads[:, None] * stride_oh
        + split * stride_os
        + offs_l[None, :]
    )
    tl.store(o_ptrs, out, mask=h_mask[:, None])
    lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
    tl.store(LSE_PART + b * stride_lb + heads * stride_lh + split, lse, mask=h_mask)


MAX_BLOCK_H = 64  # heads one program holds; more heads take several head blocks


def _scale_tensor(scale: float | torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """The per-tensor dequant scale as a 1-element fp32 device tensor (read by the kernel, so a
    device-resident scale is never copied to the host)."""
    if isinstance(scale, torch.Tensor) and scale.numel() != 1:
        raise ValueError("MLA FP8 latent caches take one per-tensor scale")
    return scale_vector(scale, 1, device)


def _scalar(scale: float | torch.Tensor | None) -> float:
    """Host value of the scale, for the float64 references only."""
    if scale is None:
        return 1.0
    t = torch.as_tensor(scale)
    if t.numel() != 1:
        raise ValueError("MLA FP8 latent caches take one per-tensor scale")
    return float(t)


def mla_block_h(cfg: dict, heads: int) -> int:
    """Heads per program: all of the rank's heads (power of two, >= 16 for the MMA), capped by
    the table's BLOCK_H (chosen per arch by the compile gate: where a [64, 512] fp32 accumulator
    spills, a smaller block) and by MAX_BLOCK_H. A table without BLOCK_H keeps 16."""
    cap = min(int(cfg.get("BLOCK_H", 16)), MAX_BLOCK_H)
    return max(16, min(cap, next_pow2(heads)))


def mla_launch(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    indices: torch.Tensor | None,
    *,
    op: str,
    kv_scale: float | torch.Tensor | None,
    sm_scale: float | None,
    num_splits: int | None,
    out: torch.Tensor | None,
    return_lse: bool,
    max_seq_len: int | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Shared launcher of the dense (indices=None) and sparse MLA decode paths. Reads no
    device value on the host (see _common.py)."""
    if kv_cache.dim() == 2:
        kv_cache = kv_cache.unsqueeze(1)
    batch, heads, d = q.shape
    _, page_size, dkv = kv_cache.shape
    d_lat = d - ROPE_DIM
    if dkv != d or d_lat != next_pow2(d_lat):
        raise ValueError(
            f"q [B, H, {d}] and cache [..., {dkv}] must both be a power-of-two "
            f"latent plus {ROPE_DIM} rope dims (GLM-5: 512 + 64)"
        )
    if q.stride(-1) != 1 or kv_cache.stride(-1) != 1:
        raise ValueError("q and kv_cache need a contiguous last dim")
    check_block_table(block_table, seq_lens, page_size)
    check_splits(num_splits)
    cap = block_table.shape[1] * page_size
    bound = context_bound(block_table, page_size, max_seq_len)
    sm_scale = (192 + ROPE_DIM) ** -0.5 if sm_scale is None else sm_scale
    kv_tag = "fp8" if kv_cache.dtype == torch.float8_e4m3fn else "16"
    cfg = resolve_config(op, batch, f"h{heads}_d{d}_kv{kv_tag}")
    block_h = mla_block_h(cfg, heads)
    head_blocks = -(-heads // block_h)
    if indices is not None:
        num_idx = indices.shape[1]
        work = min(num_idx, bound)
    else:
        num_idx = 0
        work = bound
    splits = num_splits or plan_splits(cfg, batch * head_blocks, work)

    if out is None:
        out = torch.empty(batch, heads, d_lat, dtype=q.dtype, device=q.device)
    direct = splits == 1 and out.is_contiguous()
    o_part = (
        out.view(batch, heads, 1, d_lat)
        if direct
        else torch.empty(batch, heads, splits, d_lat, dtype=torch.float32, device=q.device)
    )
    lse_part = torch.empty(batch, heads, splits, dtype=torch.float32, device=q.device)
    idx = indices if indices is not None else seq_lens
    if batch:
        _mla_decode_split_kernel[(batch, head_blocks, splits)](
            q,
            kv_cache,
            block_table,
            seq_lens,
            idx,
            o_part,
            lse_part,
            _scale_tensor(kv_scale, q.device),
            sm_scale * LOG2E,
            cap,
            heads,
            num_idx,
            splits,
            q.stride(0),
            q.stride(1),
            kv_cache.stride(0),
            kv_cache.stride(1),
            block_table.stride(0),
            idx.stride(0),
            o_part.stride(0),
            o_part.stride(1),
            o_part.stride(2),
            lse_part.stride(0),
            lse_part.stride(1),
            PAGE=page_size,
            D_LAT=d_lat,
            D_ROPE=ROPE_DIM,
            BLOCK_H=block_h,
            BLOCK_N=int(cfg["BLOCK_N"]),
            SPARSE=indices is not None,
            UPCAST=interpreting() or q.dtype == torch.float32,
            num_warps=int(cfg["num_warps"]),
            num_stages=int(cfg["num_stages"]),
        )
    lse = lse_part[..., 0] if splits == 1 else None
    if not direct and batch:
        lse = torch.empty(batch, heads, dtype=torch.float32, device=q.device)
        merge_splits(
            o_part.view(batch * heads, splits, d_lat),
            lse_part.view(batch * heads, splits),
            out.view(batch * heads, d_lat),
            lse.view(-1),
        )
    if return_lse:
        return out, lse * LN2
    return out


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    kv_scale: float | torch.Tensor | None = None,
    sm_scale: float | None = None,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    return_lse: bool = False,
    max_seq_len: int | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA decode: q [B, H, 512+64] over a paged latent cache -> [B, H, 512].

    sm_scale defaults to GLM-5's 1/sqrt(qk_nope + qk_rope) = 1/sqrt(256). `max_seq_len` (a host
    int >= every seq_lens entry, e.g. max of SGLang's seq_lens_cpu) sizes the split plan; without
    it the block table's capacity does. No host sync either way; CUDA-graph capturable with a
    fixed `num_splits`.
    """
    return mla_launch(
        q,
        kv_cache,
        block_table,
        seq_lens,
        None,
        op="decode_mla",
        kv_scale=kv_scale,
        sm_scale=sm_scale,
        num_splits=num_splits,
        out=out,
        return_lse=return_lse,
        max_seq_len=max_seq_len,
    )


# ----------------------------------------------------------------------------- reference


def mla_decode_ref(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    kv_scale: float | torch.Tensor | None = None,
    sm_scale: float | None = None,
    indices: torch.Tensor | None = None,
) -> torch.Tensor:
    """Float64 reference; with `indices` [B, K] only those positions (-1/out of range skipped,
    duplicates counted as often as listed) are attended. No visible key yields zeros."""
    if kv_cache.dim() == 2:
        kv_cache = kv_cache.unsqueeze(1)
    batch, heads, d = q.shape
    page = kv_cache.shape[1]
    d_lat = d - ROPE_DIM
    sm_scale = (192 + ROPE_DIM) ** -0.5 if sm_scale is None else sm_scale
    scale = _scalar(kv_scale)
    out = torch.zeros(batch, heads, d_lat, dtype=torch.float64, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        if indices is None:
            pos = torch.arange(n, device=q.device)
        else:
            pos = indices[b].long()
            pos = pos[(pos >= 0) & (pos < n)]
        if pos.numel() == 0:
            continue
        kv = kv_cache[block_table[b, pos // page].long(), pos % page].double() * scale
        s = torch.einsum("hd,nd->hn", q[b].double(), kv) * sm_scale
        out[b] = torch.softmax(s, dim=-1) @ kv[:, :d_lat]
    return out
