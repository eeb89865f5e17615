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

from sgl_kernel_rocm.attention import _common, split_kv


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
    seq_len = split_kv.clamped_seq_len(SEQ, b, seq_cap)
    start = tl.where(window >= 0, tl.maximum(seq_len - 1 - window, 0), 0)
    lo, hi = split_kv.split_range(start, seq_len, split, num_splits)

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
        p, alpha, m_i, l_i = split_kv.online_softmax(qk, m_i, l_i)
        if UPCAST:
            pv = tl.dot(p, v.to(tl.float32))
        else:
            pv = tl.dot(p.to(q.dtype), v.to(q.dtype))
        acc = acc * alpha[:, None] + pv

    split_kv.store_partial(O_PART, LSE_PART, acc, m_i, l_i, v_scale, b, heads, split, offs_dv,
                           h_mask, dv_mask, stride_ob, stride_oh, stride_os, stride_lb,
                           stride_lh)  # fmt: skip


def _as_paged(cache: torch.Tensor) -> torch.Tensor:
    return cache.unsqueeze(1) if cache.dim() == 3 else cache


def gqa_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    k_scale: _common.Scale = None,
    v_scale: _common.Scale = None,
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
    _common.check_block_table(block_table, seq_lens, page_size)
    _common.check_splits(num_splits)
    cap = block_table.shape[1] * page_size
    group = hq // hkv
    sm_scale = d**-0.5 if sm_scale is None else sm_scale
    window = -1 if sliding_window is None or sliding_window < 0 else int(sliding_window)

    kv_tag = "fp8" if k_cache.dtype == torch.float8_e4m3fn else "16"
    cfg = _common.resolve_config("decode_gqa", batch, f"hq{hq}_hkv{hkv}_d{d}_kv{kv_tag}")
    max_len = _common.context_bound(block_table, page_size, max_seq_len)
    if window >= 0:
        max_len = min(max_len, window + 1)
    splits = num_splits or _common.plan_splits(cfg, batch * hkv, max_len)

    ks = _common.scale_vector(k_scale, hkv, q.device)
    vs = _common.scale_vector(v_scale, hkv, q.device)
    parts = split_kv.SplitKV.plan(q, out, hq, dv, splits)
    if batch:
        _gqa_decode_split_kernel[(batch, hkv, splits)](
            q,
            k_cache,
            v_cache,
            block_table,
            seq_lens,
            ks,
            vs,
            parts.o_part,
            parts.lse_part,
            sm_scale * _common.LOG2E,
            cap,
            window,
            splits,
            *q.stride()[:2],
            *k_cache.stride()[:3],
            *v_cache.stride()[:3],
            block_table.stride(0),
            *parts.strides(),
            GROUP=group,
            PAGE=page_size,
            D=d,
            DV=dv,
            BLOCK_H=max(16, _common.next_pow2(group)),
            BLOCK_D=max(16, _common.next_pow2(d)),
            BLOCK_DV=max(16, _common.next_pow2(dv)),
            BLOCK_N=int(cfg["BLOCK_N"]),
            **_common.launch_options(cfg, q),
        )
    return parts.finish(return_lse)


# ----------------------------------------------------------------------------- reference


def gqa_decode_ref(
    *tensors: torch.Tensor,
    k_scale: _common.Scale = None,
    v_scale: _common.Scale = None,
    sm_scale: float | None = None,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Float64 torch reference of gqa_decode, over its tensors (q, k_cache, v_cache,
    block_table, seq_lens); a request with no visible key yields zeros."""
    q, k_cache, v_cache, block_table, seq_lens = tensors
    k_cache, v_cache = _as_paged(k_cache), _as_paged(v_cache)
    batch, hq, d = q.shape
    _, page, hkv, _ = k_cache.shape
    group = hq // hkv
    sm_scale = d**-0.5 if sm_scale is None else sm_scale
    ks = _common.scale_vector(k_scale, hkv, q.device).double()
    vs = _common.scale_vector(v_scale, hkv, q.device).double()
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
