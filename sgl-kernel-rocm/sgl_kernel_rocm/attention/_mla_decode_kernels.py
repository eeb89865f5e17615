"""Triton body of paged MLA decode in absorbed form (GLM-5 / DeepSeek shapes), dense or top-k
sparse. Callers use `sgl_kernel_rocm.attention.mla_decode` (the wrapper); the float64
reference is `reference.mla_decode_ref`.

Queries arrive already projected into the latent space: q [B, H, 576] = 512 latent dims (q_nope
times W_UK) then 64 rope dims. The cache holds one shared entry per token, [num_pages,
page_size, row] (latent c_kv then k_pe) in one of SGLang's layouts (latent_layout.py): plain
576-wide rows, bf16 or FP8 e4m3 with one per-tensor dequant scale, or packed FP8 rows of 656
bytes (FP8 c_kv, an fp32 scale per 128 values, bf16 k_pe).
Scores are q_lat.c + q_pe.k_pe; values are the latent c itself, so the output is [B, H, 512]
in latent space (the caller applies W_UV). Split-KV partials and their merge: split_kv.py.
One program holds up to BLOCK_H heads (the rank's heads rounded up to a power of two, at least
16 for the MMA, capped by the arch table's BLOCK_H and MAX_BLOCK_H: mla_decode.mla_block_h): with
all heads in one program each latent tile is read from memory once per request and split, not
once per 16-head block; the [BLOCK_H, 512] fp32 accumulator is spread over the program's warps
by Triton's layout.
The same kernel serves DSA sparse decode (SPARSE=True): keys come from a per-request list of
token positions instead of the whole context (see dsa_decode.py).
"""

from __future__ import annotations

import triton
import triton.language as tl

from sgl_kernel_rocm.attention import fp8_bits, split_kv


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
