"""Paged MLA decode in absorbed form (GLM-5 / DeepSeek shapes), dense or top-k sparse.

Queries arrive already projected into the latent space: q [B, H, 576] = 512 latent dims (q_nope
times W_UK) then 64 rope dims. The cache holds one shared entry per token, [num_pages,
page_size, row] (latent c_kv then k_pe) in one of SGLang's layouts (latent_layout.py): plain
576-wide rows, bf16 or FP8 e4m3 with one per-tensor dequant scale, or packed FP8 rows of 656
bytes (FP8 c_kv, an fp32 scale per 128 values, bf16 k_pe).
Scores are q_lat.c + q_pe.k_pe; values are the latent c itself, so the output is [B, H, 512]
in latent space (the caller applies W_UV). Split-KV partials and their merge: split_kv.py.
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

from sgl_kernel_rocm.attention import _common, fp8_bits, split_kv
from sgl_kernel_rocm.attention.latent_layout import LatentLayout, is_fp8

KV_LORA_RANK = 512
ROPE_DIM = 64


@triton.jit
def _tile_rows(KV, bt_row, idx_row, n0, hi, seq_len, stride_kvp, stride_kvt,
               PAGE: tl.constexpr, BLOCK_N: tl.constexpr, SPARSE: tl.constexpr):  # fmt: skip
    """Cache row pointers [BLOCK_N] and mask of the tile starting at n0 (a context position, or
    a slot of the sparse index list). Dense tiles start on multiples of BLOCK_N
    (split_range_aligned), so with PAGE % BLOCK_N == 0 a tile lies in one page: one page id."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    n_mask = offs_n < hi
    if SPARSE:
        pos = tl.load(idx_row + offs_n, mask=n_mask, other=-1)
        n_mask = n_mask & (pos >= 0) & (pos < seq_len)
        page = tl.load(bt_row + pos // PAGE, mask=n_mask, other=0).to(tl.int64)
        return KV + page * stride_kvp + (pos % PAGE) * stride_kvt, n_mask
    elif PAGE % BLOCK_N == 0:
        page = tl.load(bt_row + n0 // PAGE, mask=n0 < hi, other=0).to(tl.int64)
        return KV + page * stride_kvp + (offs_n % PAGE) * stride_kvt, n_mask
    else:
        page = tl.load(bt_row + offs_n // PAGE, mask=n_mask, other=0).to(tl.int64)
        return KV + page * stride_kvp + (offs_n % PAGE) * stride_kvt, n_mask


@triton.jit
def _load_latent(row, n_mask, D_LAT: tl.constexpr, D_ROPE: tl.constexpr, FP8_ISA: tl.constexpr,
                 PACKED: tl.constexpr, ROPE_OFF: tl.constexpr, SCALE_OFF: tl.constexpr,
                 GROUP: tl.constexpr, NOPE_UNBIAS: tl.constexpr):  # fmt: skip
    """One tile's latent c [N, D_LAT] and rope keys [N, D_ROPE] from rows laid out as the cache's
    LatentLayout says (latent_layout.py: the offsets and scales come from it). Plain rows: bf16
    (an FP8 tile bit-moved once, worth value * 2^-bias: fp8_bits.py). Packed FP8 rows (bytes):
    the codes bit-moved the same way, then times their group's fp32 scale * 2^bias (c in fp32,
    worth its value), and k_pe read as the bf16 it is stored in."""
    if FP8_ISA == "amdgcn":  # 32-bit words of 4 codes, bit-moved once (fp8_bits.py)
        words = row.to(tl.pointer_type(tl.int32))[:, None]
        c = tl.load(  # stream: kv
            words + tl.arange(0, D_LAT // 4)[None, :], mask=n_mask[:, None], other=0
        )
        if not PACKED:
            k_pe = tl.load(  # stream: kv_rope
                words + ROPE_OFF // 4 + tl.arange(0, D_ROPE // 4)[None, :],
                mask=n_mask[:, None], other=0,
            )  # fmt: skip
        c = fp8_bits.e4m3_words_as_bf16_amdgcn(c)
        if not PACKED:
            k_pe = fp8_bits.e4m3_words_as_bf16_amdgcn(k_pe)
    else:
        c = tl.load(  # stream: kv
            row[:, None] + tl.arange(0, D_LAT)[None, :], mask=n_mask[:, None], other=0.0
        )
        if not PACKED:
            k_pe = tl.load(  # stream: kv_rope
                row[:, None] + ROPE_OFF + tl.arange(0, D_ROPE)[None, :], mask=n_mask[:, None],
                other=0.0,
            )  # fmt: skip
    if FP8_ISA == "ptx":  # one opaque op per 4 codes: each tile converted once
        c = fp8_bits.e4m3_as_bf16_ptx(c)
        if not PACKED:
            k_pe = fp8_bits.e4m3_as_bf16_ptx(k_pe)
    elif FP8_ISA == "ops":  # the interpreter: the same bit move as integer ops
        c = fp8_bits.e4m3_as_bf16(c)
        if not PACKED:
            k_pe = fp8_bits.e4m3_as_bf16(k_pe)
    if PACKED:
        k_pe = tl.load(  # stream: kv_rope
            (row + ROPE_OFF).to(tl.pointer_type(tl.bfloat16))[:, None]
            + tl.arange(0, D_ROPE)[None, :], mask=n_mask[:, None], other=0.0,
        )  # fmt: skip
        scale = tl.load(  # stream: kv_scale
            (row + SCALE_OFF).to(tl.pointer_type(tl.float32))[:, None]
            + tl.arange(0, D_LAT // GROUP)[None, :], mask=n_mask[:, None], other=0.0,
        )  # fmt: skip
        n: tl.constexpr = c.shape[0]
        grouped = tl.reshape(c, (n, D_LAT // GROUP, GROUP))
        c = tl.reshape(grouped.to(tl.float32) * (scale * NOPE_UNBIAS)[:, :, None], (n, D_LAT))
    return c, k_pe


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
    FP8_ISA: tl.constexpr,
    Q_LIFT: tl.constexpr,
    KV_UNSCALE: tl.constexpr,
    UPCAST: tl.constexpr,
    KEYS_ON_M: tl.constexpr = False,
    PREFETCH: tl.constexpr = False,
    PACKED: tl.constexpr = False,
    ROPE_OFF: tl.constexpr = 512,
    SCALE_OFF: tl.constexpr = 0,
    GROUP: tl.constexpr = 512,
    NOPE_UNBIAS: tl.constexpr = 1.0,
):
    b = tl.program_id(0)
    hb = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = split_kv.clamped_seq_len(SEQ, b, seq_cap)
    # Dense: iterate context positions (splits start on tile multiples); sparse: iterate slots
    # of the index list.
    if SPARSE:
        lo, hi = split_kv.split_range(0, num_idx, split, num_splits)
    else:
        lo, hi = split_kv.split_range_aligned(seq_len, split, num_splits, BLOCK_N)

    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = heads < num_heads
    offs_l = tl.arange(0, D_LAT)
    offs_r = tl.arange(0, D_ROPE)
    q_row = Q + b.to(tl.int64) * stride_qb + heads * stride_qh
    if KEYS_ON_M:
        # Keys on the MMA's M side (scores [N, H], accumulator [D_LAT, H]): a few heads pad
        # only the N side, and both MMAs are BLOCK_N or D_LAT rows tall.
        q_lat = tl.load(q_row[None, :] + offs_l[:, None], mask=h_mask[None, :], other=0.0)
        q_pe = tl.load(q_row[None, :] + D_LAT + offs_r[:, None], mask=h_mask[None, :], other=0.0)
        acc = tl.zeros([D_LAT, BLOCK_H], tl.float32)
    else:
        q_lat = tl.load(q_row[:, None] + offs_l[None, :], mask=h_mask[:, None], other=0.0)
        q_pe = tl.load(q_row[:, None] + D_LAT + offs_r[None, :], mask=h_mask[:, None], other=0.0)
        acc = tl.zeros([BLOCK_H, D_LAT], tl.float32)
    # An FP8 tile becomes bf16 codes worth value * 2^-bias (fp8_bits.py); q and P are lifted by
    # Q_LIFT (exact) so products stay normal floats, and KV_UNSCALE = 2^bias / Q_LIFT folds back
    # into both scales. Identity factors for a bf16 cache and for packed FP8 rows, which
    # _load_latent dequantizes by their group scales.
    q_lat = (q_lat.to(tl.float32) * Q_LIFT).to(q_lat.dtype)
    q_pe = (q_pe.to(tl.float32) * Q_LIFT).to(q_pe.dtype)
    if UPCAST:
        # The interpreter's bf16 tl.dot is wrong (triton #11584): do the math in fp32.
        q_lat = q_lat.to(tl.float32)
        q_pe = q_pe.to(tl.float32)
    kv_scale = tl.load(KV_SCALE) * KV_UNSCALE
    score_scale = qk_scale_log2 * kv_scale

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    bt_row = BT + b.to(tl.int64) * stride_btb
    idx_row = IDX + b.to(tl.int64) * stride_ib
    if PREFETCH:  # tile lo's page ids before the loop; each step fetches the next tile's
        row, n_mask = _tile_rows(KV, bt_row, idx_row, lo, hi, seq_len, stride_kvp, stride_kvt,
                                 PAGE, BLOCK_N, SPARSE)  # fmt: skip
    for n0 in range(lo, hi, BLOCK_N):
        if PREFETCH:
            row_next, mask_next = _tile_rows(KV, bt_row, idx_row, n0 + BLOCK_N, hi, seq_len,
                                             stride_kvp, stride_kvt, PAGE, BLOCK_N,
                                             SPARSE)  # fmt: skip
        else:
            row, n_mask = _tile_rows(KV, bt_row, idx_row, n0, hi, seq_len, stride_kvp,
                                     stride_kvt, PAGE, BLOCK_N, SPARSE)  # fmt: skip
        c, k_pe = _load_latent(row, n_mask, D_LAT, D_ROPE, FP8_ISA, PACKED, ROPE_OFF, SCALE_OFF,
                               GROUP, NOPE_UNBIAS)  # fmt: skip
        c = c.to(q_lat.dtype)
        k_pe = k_pe.to(q_pe.dtype)
        if KEYS_ON_M:
            qk = tl.dot(c, q_lat) + tl.dot(k_pe, q_pe)  # [N, H]
            qk = tl.where(n_mask[:, None], qk * score_scale, float("-inf"))
            p, alpha, m_i, l_i = split_kv.online_softmax(qk, m_i, l_i, 0)
            acc = acc * alpha[None, :] + tl.dot(tl.trans(c), (p * Q_LIFT).to(c.dtype))
        else:
            qk = tl.dot(q_lat, tl.trans(c)) + tl.dot(q_pe, tl.trans(k_pe))  # [H, N]
            qk = tl.where(n_mask[None, :], qk * score_scale, float("-inf"))
            p, alpha, m_i, l_i = split_kv.online_softmax(qk, m_i, l_i)
            acc = acc * alpha[:, None] + tl.dot((p * Q_LIFT).to(c.dtype), c)
        if PREFETCH:
            row, n_mask = row_next, mask_next

    if KEYS_ON_M:
        acc = tl.trans(acc)
    d_mask = offs_l < D_LAT
    split_kv.store_partial(O_PART, LSE_PART, acc, m_i, l_i, kv_scale, b, heads, split, offs_l,
                           h_mask, d_mask, stride_ob, stride_oh, stride_os, stride_lb,
                           stride_lh)  # fmt: skip


MAX_BLOCK_H = 64  # heads one program holds; more heads take several head blocks
# Launch-config entries a caller may override (mla_decode's tile_config).
TILE_KEYS = frozenset({"BLOCK_N", "BLOCK_H", "num_warps", "num_stages", "KEYS_ON_M", "PREFETCH"})
# The kernel's tile variants by name (arch tables set them per shape; benchmarks time each).
TILE_VARIANTS = {
    "table": {},
    "keys_on_m": {"KEYS_ON_M": True, "PREFETCH": False},
    "prefetch": {"KEYS_ON_M": False, "PREFETCH": True},
    "keys_on_m+prefetch": {"KEYS_ON_M": True, "PREFETCH": True},
}


def _scale_tensor(scale: _common.Scale, device: torch.device) -> torch.Tensor:
    """The per-tensor dequant scale as a 1-element fp32 device tensor (read by the kernel, so a
    device-resident scale is never copied to the host)."""
    if isinstance(scale, torch.Tensor) and scale.numel() != 1:
        raise ValueError("MLA FP8 latent caches take one per-tensor scale")
    return _common.scale_vector(scale, 1, device)


def _scalar(scale: _common.Scale) -> float:
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
    return max(16, min(cap, _common.next_pow2(heads)))


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    indices: torch.Tensor | None = None,
    kv_scale: _common.Scale = None,
    sm_scale: float | None = None,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    return_lse: bool = False,
    max_seq_len: int | None = None,
    tile_config: dict | None = None,
    layout: LatentLayout | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA decode: q [B, H, 512+64] over a paged latent cache -> [B, H, 512].

    With `indices` [B, K] (checked by dsa_sparse_decode, the public sparse entry) only those
    positions are attended. sm_scale defaults to GLM-5's 1/sqrt(qk_nope + qk_rope) =
    1/sqrt(256). `max_seq_len` (a host int >= every seq_lens entry, e.g. max of SGLang's
    seq_lens_cpu) sizes the split plan; without it the block table's capacity does. No host
    sync either way (see _common.py); CUDA-graph capturable with a fixed `num_splits`.
    `tile_config` overrides entries of the arch table's launch config (BLOCK_N, num_warps,
    BLOCK_H, KEYS_ON_M, PREFETCH; e.g. a TILE_VARIANTS entry), for benchmarks and tests.
    `layout` says how the cache stores a row (latent_layout.py; default plain rows of q's
    width); packed FP8 rows carry their own scales, so they take no `kv_scale`.
    """
    if kv_cache.dim() == 2:
        kv_cache = kv_cache.unsqueeze(1)
    batch, heads, d = q.shape
    d_lat = d - ROPE_DIM
    if d_lat <= 0 or d_lat != _common.next_pow2(d_lat):
        raise ValueError(
            f"q [B, H, {d}] must be a power-of-two latent plus {ROPE_DIM} rope dims "
            "(GLM-5: 512 + 64)"
        )
    layout = layout or LatentLayout.plain(d_lat, ROPE_DIM)
    if (layout.d_lat, layout.d_rope) != (d_lat, ROPE_DIM):
        raise ValueError(
            f"q [B, H, {d}] is {d_lat} latent + {ROPE_DIM} rope dims, the layout "
            f"{layout.d_lat} + {layout.d_rope}"
        )
    if layout.packed and kv_scale is not None:
        raise ValueError("packed FP8 latent rows carry their own scales: pass no kv_scale")
    cache = layout.kernel_view(kv_cache)
    page_size = cache.shape[1]
    if q.stride(-1) != 1:
        raise ValueError("q needs a contiguous last dim")
    _common.check_block_table(block_table, seq_lens, page_size)
    _common.check_splits(num_splits)
    bound = _common.context_bound(block_table, page_size, max_seq_len)
    sm_scale = (192 + ROPE_DIM) ** -0.5 if sm_scale is None else sm_scale
    # Packed rows have table entries of their own (the per-group dequant holds more registers
    # than the plain FP8 tiles: e.g. sm90's 64-head FP8 tile spills with it): the DEFAULT ones
    # until an arch's table names them.
    kv_tag = "fp8packed" if layout.packed else "fp8" if is_fp8(kv_cache.dtype) else "16"
    op = "decode_mla" if indices is None else "decode_dsa"
    unknown = set(tile_config or {}) - TILE_KEYS
    if unknown:
        raise ValueError(f"tile_config keys {sorted(unknown)} are not among {sorted(TILE_KEYS)}")
    cfg = _common.resolve_config(op, batch, f"h{heads}_d{d}_kv{kv_tag}") | (tile_config or {})
    block_h = mla_block_h(cfg, heads)
    head_blocks = -(-heads // block_h)
    num_idx = 0 if indices is None else indices.shape[1]
    work = bound if indices is None else min(num_idx, bound)
    splits = num_splits or _common.plan_splits(cfg, batch * head_blocks, work)

    parts = split_kv.SplitKV.plan(q, out, heads, d_lat, splits)
    idx = indices if indices is not None else seq_lens
    if batch:
        _mla_decode_split_kernel[(batch, head_blocks, splits)](
            q,
            cache,
            block_table,
            seq_lens,
            idx,
            parts.o_part,
            parts.lse_part,
            _scale_tensor(kv_scale, q.device),
            sm_scale * _common.LOG2E,
            block_table.shape[1] * page_size,
            heads,
            num_idx,
            splits,
            *q.stride()[:2],
            *cache.stride()[:2],
            block_table.stride(0),
            idx.stride(0),
            *parts.strides(),
            PAGE=page_size,
            D_LAT=d_lat,
            D_ROPE=ROPE_DIM,
            BLOCK_H=block_h,
            BLOCK_N=int(cfg["BLOCK_N"]),
            SPARSE=indices is not None,
            KEYS_ON_M=bool(cfg.get("KEYS_ON_M", False)),
            PREFETCH=bool(cfg.get("PREFETCH", False)),
            **layout.kernel_constexprs(kv_cache, fp8_bits.host_isa()),
            **_common.launch_options(cfg, q),
        )
    return parts.finish(return_lse)


# ----------------------------------------------------------------------------- reference


def mla_decode_ref(
    *tensors: torch.Tensor,
    kv_scale: _common.Scale = None,
    sm_scale: float | None = None,
    indices: torch.Tensor | None = None,
    layout: LatentLayout | None = None,
) -> torch.Tensor:
    """Float64 reference of mla_decode, over its tensors (q, kv_cache, block_table, seq_lens);
    with `indices` [B, K] only those positions (-1/out of range skipped, duplicates counted as
    often as listed) are attended; `layout` unpacks the cache rows (latent_layout.py). No
    visible key yields zeros."""
    q, kv_cache, block_table, seq_lens = tensors
    if kv_cache.dim() == 2:
        kv_cache = kv_cache.unsqueeze(1)
    batch, heads, d = q.shape
    page = kv_cache.shape[1]
    d_lat = d - ROPE_DIM
    layout = layout or LatentLayout.plain(d_lat, ROPE_DIM)
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
        kv = layout.unpack(kv_cache[block_table[b, pos // page].long(), pos % page]) * scale
        s = torch.einsum("hd,nd->hn", q[b].double(), kv) * sm_scale
        out[b] = torch.softmax(s, dim=-1) @ kv[:, :d_lat]
    return out
