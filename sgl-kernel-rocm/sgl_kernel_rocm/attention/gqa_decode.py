"""Paged GQA decode attention (one query token per request), split-KV with a separate reduce.

KV cache: [num_pages, page_size, num_kv_heads, head_dim] (a 3-D [num_tokens, Hkv, D] pool is
page size 1, SGLang's token-level layout), bf16/fp16/fp32 or FP8 e4m3 with one dequant scale per
KV head. block_table[b, i] is the physical page holding tokens [i*P, (i+1)*P) of request b.
One program serves all query heads of a KV head (GQA packing), so K/V are read once per group.
Sliding window W keeps keys at positions >= seq_len - 1 - W (SGLang's torch_native convention).
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


@triton.jit
def _gqa_decode_split_kernel(
    Q,
    K,
    V,
    BT,
    SEQ,
    KS,
    VS,
    O_PART,
    LSE_PART,
    qk_scale_log2,
    seq_cap,
    window,
    num_splits,
    stride_qb,
    stride_qh,
    stride_kp,
    stride_kt,
    stride_kh,
    stride_vp,
    stride_vt,
    stride_vh,
    stride_btb,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
    GROUP: tl.constexpr,
    PAGE: tl.constexpr,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_N: tl.constexpr,
    UPCAST: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    # seq_cap = what a block-table row addresses: a bad length cannot read past the row.
    seq_len = tl.minimum(tl.load(SEQ + b).to(tl.int32), seq_cap)
    start = tl.where(window >= 0, tl.maximum(seq_len - 1 - window, 0), 0)
    per_split = tl.cdiv(seq_len - start, num_splits)
    lo = start + split * per_split
    hi = tl.minimum(lo + per_split, seq_len)

    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    h_mask = offs_h < GROUP
    d_mask = offs_d < D
    dv_mask = offs_dv < DV
    heads = kvh * GROUP + offs_h
    q = tl.load(
        Q + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
        mask=h_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    # Per-head K dequant scale folds into the score scale; V's into the output.
    score_scale = qk_scale_log2 * tl.load(KS + kvh)
    v_scale = tl.load(VS + kvh)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_DV], tl.float32)
    bt_row = BT + b.to(tl.int64) * stride_btb
    for n0 in range(lo, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_mask = offs_n < hi
        page = tl.load(bt_row + offs_n // PAGE, mask=n_mask, other=0).to(tl.int64)
        slot = offs_n % PAGE
        k = tl.load(  # stream: kv
            K + (page * stride_kp + slot * stride_kt + kvh * stride_kh)[:, None] + offs_d[None, :],
            mask=n_mask[:, None] & d_mask[None, :],
            other=0.0,
        )
        v = tl.load(  # stream: kv
            V + (page * stride_vp + slot * stride_vt + kvh * stride_vh)[:, None] + offs_dv[None, :],
            mask=n_mask[:, None] & dv_mask[None, :],
            other=0.0,
        )
        if UPCAST:
            # The interpreter's bf16 tl.dot is wrong (triton #11584): do the math in fp32.
            qk = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        else:
            qk = tl.dot(q, tl.trans(k.to(q.dtype)))
        qk = tl.where(n_mask[None, :], qk * score_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if UPCAST:
            pv = tl.dot(p, v.to(tl.float32))
        else:
            pv = tl.dot(p.to(q.dtype), v.to(q.dtype))
        acc = acc * alpha[:, None] + pv
        m_i = m_new

    has = l_i > 0
    out = acc * (v_scale / tl.where(has, l_i, 1.0))[:, None]
    o_ptrs = (
        O_PART
        + b.to(tl.int64) * stride_ob
        + heads[:, None] * stride_oh
        + split * stride_os
        + offs_dv[None, :]
    )
    tl.store(o_ptrs, out, mask=h_mask[:, None] & dv_mask[None, :])
    lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
    tl.store(LSE_PART + b * stride_lb + heads * stride_lh + split, lse, mask=h_mask)


def _as_paged(cache: torch.Tensor) -> torch.Tensor:
    return cache.unsqueeze(1) if cache.dim() == 3 else cache


def gqa_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    sm_scale: float | None = None,
    sliding_window: int | None = None,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    return_lse: bool = False,
    max_seq_len: int | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Decode attention of q [B, Hq, D] over a paged KV cache; returns [B, Hq, Dv] in q.dtype.

    No host sync: `max_seq_len` (a host int >= every seq_lens entry, e.g. max of SGLang's
    seq_lens_cpu) sizes the split plan; without it the block table's capacity does. With a fixed
    `num_splits` the launch shape depends on shapes only (CUDA-graph capturable).

    With return_lse, also returns the natural-log log-sum-exp of the scores [B, Hq] (fp32), so
    callers can merge with other attention pieces (e.g. a prefix computed elsewhere).
    """
    k_cache, v_cache = _as_paged(k_cache), _as_paged(v_cache)
    batch, hq, d = q.shape
    _, page_size, hkv, dk = k_cache.shape
    dv = v_cache.shape[-1]
    if dk != d or v_cache.shape[:3] != k_cache.shape[:3]:
        raise ValueError(
            f"q {tuple(q.shape)} / k {tuple(k_cache.shape)} / v {tuple(v_cache.shape)} do not agree"
        )
    if hq % hkv:
        raise ValueError(f"{hq} query heads are not a multiple of {hkv} KV heads")
    if k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1 or q.stride(-1) != 1:
        raise ValueError("q, k_cache and v_cache need a contiguous last dim")
    check_block_table(block_table, seq_lens, page_size)
    check_splits(num_splits)
    cap = block_table.shape[1] * page_size
    group = hq // hkv
    sm_scale = d**-0.5 if sm_scale is None else sm_scale
    window = -1 if sliding_window is None or sliding_window < 0 else int(sliding_window)

    kv_tag = "fp8" if k_cache.dtype == torch.float8_e4m3fn else "16"
    cfg = resolve_config("decode_gqa", batch, f"hq{hq}_hkv{hkv}_d{d}_kv{kv_tag}")
    max_len = context_bound(block_table, page_size, max_seq_len)
    if window >= 0:
        max_len = min(max_len, window + 1)
    splits = num_splits or plan_splits(cfg, batch * hkv, max_len)

    if out is None:
        out = torch.empty(batch, hq, dv, dtype=q.dtype, device=q.device)
    ks = scale_vector(k_scale, hkv, q.device)
    vs = scale_vector(v_scale, hkv, q.device)
    direct = splits == 1 and out.is_contiguous()
    # One split writes straight into out; more go through fp32 partials and the reduce.
    o_part = (
        out.view(batch, hq, 1, dv)
        if direct
        else torch.empty(batch, hq, splits, dv, dtype=torch.float32, device=q.device)
    )
    lse_part = torch.empty(batch, hq, splits, dtype=torch.float32, device=q.device)
    if batch:
        _gqa_decode_split_kernel[(batch, hkv, splits)](
            q,
            k_cache,
            v_cache,
            block_table,
            seq_lens,
            ks,
            vs,
            o_part,
            lse_part,
            sm_scale * LOG2E,
            cap,
            window,
            splits,
            q.stride(0),
            q.stride(1),
            k_cache.stride(0),
            k_cache.stride(1),
            k_cache.stride(2),
            v_cache.stride(0),
            v_cache.stride(1),
            v_cache.stride(2),
            block_table.stride(0),
            o_part.stride(0),
            o_part.stride(1),
            o_part.stride(2),
            lse_part.stride(0),
            lse_part.stride(1),
            GROUP=group,
            PAGE=page_size,
            D=d,
            DV=dv,
            BLOCK_H=max(16, next_pow2(group)),
            BLOCK_D=max(16, next_pow2(d)),
            BLOCK_DV=max(16, next_pow2(dv)),
            BLOCK_N=int(cfg["BLOCK_N"]),
            UPCAST=interpreting() or q.dtype == torch.float32,
            num_warps=int(cfg["num_warps"]),
            num_stages=int(cfg["num_stages"]),
        )
    lse = lse_part[..., 0] if splits == 1 else None
    if not direct and batch:
        lse = torch.empty(batch, hq, dtype=torch.float32, device=q.device) if return_lse else None
        # A strided `out` (e.g. a view into a wider buffer) gets the merged rows copied in.
        dst = (
            out
            if out.is_contiguous()
            else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        )
        merge_splits(
            o_part.view(batch * hq, splits, dv),
            lse_part.view(batch * hq, splits),
            dst.view(batch * hq, dv),
            lse.view(-1) if lse is not None else None,
        )
        if dst is not out:
            out.copy_(dst)
    if return_lse:
        return out, (lse if lse is not None else lse_part[..., 0]) * LN2
    return out


# ----------------------------------------------------------------------------- reference


def gqa_decode_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    sm_scale: float | None = None,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Float64 torch reference of gqa_decode (a request with no visible key yields zeros)."""
    k_cache, v_cache = _as_paged(k_cache), _as_paged(v_cache)
    batch, hq, d = q.shape
    _, page, hkv, _ = k_cache.shape
    group = hq // hkv
    sm_scale = d**-0.5 if sm_scale is None else sm_scale
    ks = scale_vector(k_scale, hkv, q.device).double()
    vs = scale_vector(v_scale, hkv, q.device).double()
    out = torch.zeros(batch, hq, v_cache.shape[-1], dtype=torch.float64, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        windowed = sliding_window is not None and sliding_window >= 0
        start = max(0, n - 1 - sliding_window) if windowed else 0
        pos = torch.arange(start, n, device=q.device)
        if pos.numel() == 0:
            continue
        pages = block_table[b, pos // page].long()
        k = k_cache[pages, pos % page].double() * ks[None, :, None]  # [n, Hkv, D]
        v = v_cache[pages, pos % page].double() * vs[None, :, None]
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].double(), k) * sm_scale
        out[b] = torch.einsum("hn,nhd->hd", torch.softmax(s, dim=-1), v)
    return out
