"""Triton bodies of the fused MXFP4 MoE: grouped gate_up GEMM + SwiGLU, grouped down GEMM with the
top-k weight. Callers use `sgl_kernel_rocm.moe.fused_moe_mxfp4`.

Each program owns BLOCK_M aligned slots of one expert (see align.py) and BLOCK_N output columns.
Two code paths, picked by the DOT_SCALED constexpr:
  dot_scaled: packed E2M1 + E8M0 tiles go straight into tl.dot_scaled (block-scaled MFMA/MMA
              on gfx950/sm100; Triton emulates it elsewhere).
  unpack:     nibbles are decoded and scaled in registers, then a plain tl.dot.
"""

from __future__ import annotations

import triton
import triton.language as tl

from sgl_kernel_rocm._mx_triton import quantize_tile, store_mx_tile
from sgl_kernel_rocm.moe._split_k import gate_up_split_sum, k_block_range
from sgl_kernel_rocm.moe._upcast import permute_k, upcast_words


@triton.jit
def dequant_tile(packed, scales, ROWS: tl.constexpr, COLS: tl.constexpr):
    """packed uint8 [ROWS, COLS // 2] + E8M0 [ROWS, COLS // 32] -> fp32 [ROWS, COLS]."""
    lo = packed & 0xF
    hi = (packed >> 4) & 0xF
    codes = tl.reshape(tl.join(lo, hi), (ROWS, COLS)).to(tl.int32)
    # E2M1 straight to fp32 bits (few live temporaries: this runs on every weight): exponent
    # field e = 0 is 0 or 0.5 (0x3F000000), else 2**(e-1) * (1 + m/2) = bits (e+126, m); sign 3->31.
    e = (codes >> 1) & 3
    m = codes & 1
    bits = tl.where(e == 0, m * 0x3F000000, ((e + 126) << 23) | (m << 22)) | ((codes & 8) << 28)
    s = scales.to(tl.int32)
    scale = tl.where(s == 0, 2.0**-127, (s << 23).to(tl.float32, bitcast=True))
    scale = tl.where(s == 255, float("nan"), scale)
    val = tl.reshape(bits.to(tl.float32, bitcast=True), (ROWS, COLS // 32, 32))
    return tl.reshape(val * scale[:, :, None], (ROWS, COLS))


@triton.jit
def round_bf16_rne(x, MANUAL_BF16_RNE: tl.constexpr):
    """fp32 -> fp32 holding the nearest-even bf16 value when MANUAL_BF16_RNE: the interpreter's
    fp32 -> bf16 cast truncates, while GPUs round to nearest even (then the flag is off)."""
    if MANUAL_BF16_RNE:
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        x = bits.to(tl.float32, bitcast=True)
    return x


@triton.jit
def _load_rows(x_ptr, rows, kb, K_DIM, stride_x, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    """Activation tile [R, BK] of `rows` (int64, already clamped to valid rows, so no row mask);
    also the packed bytes and scales of A4 rows (called with K/2 or K/32 and BK/2 or BK/32).

    With EVEN_K (K a multiple of BLOCK_K) the load has no mask at all, so it can be 16 bytes
    wide; padding rows re-read a valid row and their results are never stored."""
    offs_k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    ptrs = x_ptr + rows[:, None] * stride_x + offs_k[None, :]
    if EVEN_K:
        x = tl.load(ptrs)  # stream: activations
    else:
        x = tl.load(ptrs, mask=(offs_k < K_DIM)[None, :], other=0.0)  # stream: activations
    return x


@triton.jit
def _load_mx(
    q_ptr,
    s_ptr,
    rows,
    kb,
    K_DIM,
    stride_q,
    stride_s,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    WORDS: tl.constexpr = False,
    W16: tl.constexpr = False,
):
    """MXFP4 weight tile of `rows` (int64, clamped; output columns of one expert) at K block kb:
    packed uint8 [R, BK/2] (or int32 words [R, BK/8] with WORDS) + E8M0 [R, BK/32]. With W16
    the weights are bf16/fp16 [R, BK] (the bf16-weight baseline) and the second value is the
    same tile (no scales)."""
    offs_s = kb * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)
    s_ptrs = s_ptr + rows[:, None] * stride_s + offs_s[None, :]
    if W16:
        offs_k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        q_ptrs = q_ptr + rows[:, None] * stride_q + offs_k[None, :]
        w_ok = (offs_k < K_DIM)[None, :]
    elif WORDS:
        # Rows are a multiple of 4 bytes long (the wrapper checks): read them as int32 words.
        offs_w = kb * (BLOCK_K // 8) + tl.arange(0, BLOCK_K // 8)
        q_ptrs = (
            q_ptr.to(tl.pointer_type(tl.int32)) + rows[:, None] * (stride_q // 4) + offs_w[None, :]
        )
        w_ok = (offs_w < K_DIM // 8)[None, :]
    else:
        # From the block index kb, not k0 // 2: the compiler then knows the packed offset is a
        # multiple of BLOCK_K / 2, which is what lets it load 16 bytes at a time.
        offs_h = kb * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)
        q_ptrs = q_ptr + rows[:, None] * stride_q + offs_h[None, :]
        w_ok = (offs_h < K_DIM // 2)[None, :]
    if EVEN_K:
        q = tl.load(q_ptrs)  # stream: weights
    else:
        q = tl.load(q_ptrs, mask=w_ok, other=0)  # stream: weights
    if W16:
        s = q
    elif EVEN_K:
        s = tl.load(s_ptrs)  # stream: scales
    else:
        s = tl.load(s_ptrs, mask=(offs_s < K_DIM // 32)[None, :], other=127)  # stream: scales
    return q, s


@triton.jit
def _a_operand(
    a,
    a_scale,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    A4: tl.constexpr,
    DOT_SCALED: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    """The A operand as the chosen path takes it: as loaded for dot_scaled, else decoded."""
    if DOT_SCALED:
        out = a
    elif A4:
        out = dequant_tile(a, a_scale, BLOCK_M, BLOCK_K).to(DOT_DTYPE)
    else:
        out = a.to(DOT_DTYPE)
    return out


@triton.jit
def _mac(
    acc,
    a,
    a_scale,
    wq,
    ws,
    A_FMT: tl.constexpr,
    DOT_SCALED: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    WORDS: tl.constexpr = False,
    FULL_SCALE_RANGE: tl.constexpr = True,
    W16: tl.constexpr = False,
    UPCAST: tl.constexpr = "triton",
    SWAP_AB: tl.constexpr = False,
):
    """acc += a @ dequant(w)^T through the chosen code path (one return, one type); with the
    "ptx" upcast both operands arrive in `permute_k`'s K order. With SWAP_AB the weights take
    the MMA's M side and acc is the transposed tile [BLOCK_N, BLOCK_M]: acc += dequant(w) @ a^T
    (decode: a few tokens, so the weight rows fill the MMA's tall side; wgmma on sm90)."""
    if W16:
        w = wq.to(DOT_DTYPE)
        if SWAP_AB:
            acc = tl.dot(w, tl.trans(a), acc)
        else:
            acc = tl.dot(a, tl.trans(w), acc)
    elif DOT_SCALED:
        # A16: dot_scaled takes no scale for a bf16/fp16 operand. fast_math skips the NaN
        # handling of E8M0 0xFF scales: exact when the load-time layout check found none.
        if A_FMT == "e2m1":
            if SWAP_AB:
                acc = tl.dot_scaled(wq, ws, "e2m1", tl.trans(a), a_scale, "e2m1", acc)
            else:
                acc = tl.dot_scaled(a, a_scale, "e2m1", tl.trans(wq), ws, "e2m1", acc)
        elif SWAP_AB:
            acc = tl.dot_scaled(wq, ws, "e2m1", tl.trans(a), None, A_FMT, acc,
                                fast_math=not FULL_SCALE_RANGE)  # fmt: skip
        else:
            acc = tl.dot_scaled(a, None, A_FMT, tl.trans(wq), ws, "e2m1", acc,
                                fast_math=not FULL_SCALE_RANGE)  # fmt: skip
    else:
        if WORDS:
            w = upcast_words(
                wq, ws, BLOCK_N, BLOCK_K, FULL_SCALE_RANGE, UPCAST, DOT_DTYPE == tl.float32
            ).to(DOT_DTYPE)
        else:
            w = dequant_tile(wq, ws, BLOCK_N, BLOCK_K).to(DOT_DTYPE)
        if SWAP_AB:
            acc = tl.dot(w, tl.trans(a), acc)
        else:
            acc = tl.dot(a, tl.trans(w), acc)
    return acc


@triton.jit
def _act_tile(
    x_ptr,
    xq_ptr,
    xs_ptr,
    rows,
    kb,
    K_DIM,
    stride_x,
    stride_xq,
    stride_xs,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    A4: tl.constexpr,
    DOT_SCALED: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    EVEN_K: tl.constexpr,
    PERMUTE_K: tl.constexpr = False,
):
    """(A operand, its E8M0 scales) for one K step; without A4 the second is a placeholder that
    `_mac` never reads, so every branch returns the same pair. PERMUTE_K puts the operand in
    the "ptx" upcast's K order (`permute_k`)."""
    if A4:
        # Packed rows are plain rows of K/2 bytes (and K/32 scales): `_load_rows` fits, and keeps
        # activation loads apart from the weight stream's.
        aq = _load_rows(xq_ptr, rows, kb, K_DIM // 2, stride_xq, BLOCK_K // 2, EVEN_K)
        a_s = _load_rows(xs_ptr, rows, kb, K_DIM // 32, stride_xs, BLOCK_K // 32, EVEN_K)
        a = _a_operand(aq, a_s, BLOCK_M, BLOCK_K, A4, DOT_SCALED, DOT_DTYPE)
    else:
        a16 = _load_rows(x_ptr, rows, kb, K_DIM, stride_x, BLOCK_K, EVEN_K)
        a = _a_operand(a16, a16, BLOCK_M, BLOCK_K, A4, DOT_SCALED, DOT_DTYPE)
        a_s = a16
    if PERMUTE_K:
        a = permute_k(a, BLOCK_M, BLOCK_K)
    return a, a_s


@triton.jit
def _assume_nonneg(a, b, c, d, e, f, g, h):
    """Tell the compiler sizes and strides are >= 0: with known non-negative offsets the AMD
    backend may turn global loads into buffer loads (range-checked, fewer address registers)."""
    tl.assume(a >= 0)
    tl.assume(b >= 0)
    tl.assume(c >= 0)
    tl.assume(d >= 0)
    tl.assume(e >= 0)
    tl.assume(f >= 0)
    tl.assume(g >= 0)
    tl.assume(h >= 0)


@triton.jit
def _tile_rows(
    pid_m, pid_n, sorted_ids_ptr, block_expert_ptr, n_slots, N_DIM,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """What program (pid_m, pid_n) of a grouped GEMM owns: its expert, its BLOCK_M slots (int64,
    padding clamped to slot 0, with the mask of real ones) and its BLOCK_N output columns (with
    their mask, and clamped to 0 as weight rows: the loads need no row mask, and columns past
    N_DIM are never stored)."""
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ids_ptr + offs_m)
    row_ok = slot < n_slots
    # int64 row offsets: slot * stride passes 2**31 near 44K tokens x top-8 at H = 6144.
    slot64 = tl.where(row_ok, slot, 0).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N_DIM
    n_rows = tl.where(n_ok, offs_n, 0).to(tl.int64)
    return expert, slot64, row_ok, offs_n, n_ok, n_rows


@triton.jit
def _mx_step(
    acc, a, a_s, w_e, ws_e, n_rows, kb, K_DIM, stride_wn, stride_wsn,
    A_FMT: tl.constexpr, DOT_SCALED: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, DOT_DTYPE: tl.constexpr, EVEN_K: tl.constexpr, WORDS: tl.constexpr,
    FULL_SCALE_RANGE: tl.constexpr, W16: tl.constexpr, UPCAST: tl.constexpr,
    SWAP_AB: tl.constexpr = False,
):  # fmt: skip
    """One K step of one weight tile: load rows `n_rows` of the expert at K block kb, then
    acc += a @ dequant(w)^T (acc^T with SWAP_AB, see `_mac`)."""
    wq, ws = _load_mx(w_e, ws_e, n_rows, kb, K_DIM, stride_wn, stride_wsn, BLOCK_K, EVEN_K,
                      WORDS, W16)  # fmt: skip
    return _mac(acc, a, a_s, wq, ws, A_FMT, DOT_SCALED, BLOCK_N, BLOCK_K, DOT_DTYPE, WORDS,
                FULL_SCALE_RANGE, W16, UPCAST, SWAP_AB)  # fmt: skip


@triton.jit
def gate_up_swiglu_kernel(
    x_ptr,
    xq_ptr,
    xs_ptr,
    w_ptr,
    ws_ptr,
    out_ptr,
    outq_ptr,
    outs_ptr,
    sorted_ids_ptr,
    block_expert_ptr,
    num_padded_ptr,
    part_ptr,
    tile_cnt_ptr,
    n_slots,
    top_k,
    H,
    INTER,
    stride_x,
    stride_xq,
    stride_xs,
    stride_we,
    stride_wn,
    stride_wse,
    stride_wsn,
    stride_out,
    stride_outq,
    stride_outs,
    # tile / formats and code path / upcast variant (as `triton_moe` passes them to both GEMMs)
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    A4: tl.constexpr, DOT_SCALED: tl.constexpr, A_FMT: tl.constexpr, DOT_DTYPE: tl.constexpr,
    MANUAL_BF16_RNE: tl.constexpr, WORDS: tl.constexpr = False,
    FULL_SCALE_RANGE: tl.constexpr = True, W16: tl.constexpr = False,
    UPCAST: tl.constexpr = "triton", SPLIT_K: tl.constexpr = 1, SWAP_AB: tl.constexpr = False,
):  # fmt: skip
    """out[slot, n] = silu(x[tok] . Wg[e, n]) * (x[tok] . Wu[e, n]); A4 also stores it as MXFP4.
    With SPLIT_K > 1 program (m, n, s) runs the s-th range of K blocks and the last split of a
    tile to arrive sums the fp32 partials (`part_ptr`, counters `tile_cnt_ptr`) in split order
    before SwiGLU (`_split_k.py`). With SWAP_AB the loop accumulates the transposed tiles
    (weights on the MMA's M side) and transposes them once after it."""
    _assume_nonneg(H, INTER, stride_x, stride_we, stride_wn, stride_wse, stride_wsn, stride_out)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return
    expert, slot64, row_ok, offs_n, n_ok, n_rows = _tile_rows(
        pid_m, pid_n, sorted_ids_ptr, block_expert_ptr, n_slots, INTER, BLOCK_M, BLOCK_N
    )
    tok = slot64 // top_k
    w_e = w_ptr + expert * stride_we
    ws_e = ws_ptr + expert * stride_wse

    if SWAP_AB:
        acc_g = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    pid_s = tl.program_id(2)
    kb_lo, kb_hi = k_block_range(tl.cdiv(H, BLOCK_K), pid_s, SPLIT_K)
    for kb in range(kb_lo, kb_hi):
        a, a_s = _act_tile(
            x_ptr, xq_ptr, xs_ptr, tok, kb, H, stride_x, stride_xq, stride_xs,
            BLOCK_M, BLOCK_K, A4, DOT_SCALED, DOT_DTYPE, EVEN_K, WORDS and UPCAST == "ptx",
        )  # fmt: skip
        acc_g = _mx_step(acc_g, a, a_s, w_e, ws_e, n_rows, kb, H, stride_wn, stride_wsn, A_FMT,
                         DOT_SCALED, BLOCK_N, BLOCK_K, DOT_DTYPE, EVEN_K, WORDS,
                         FULL_SCALE_RANGE, W16, UPCAST, SWAP_AB)  # fmt: skip
        acc_u = _mx_step(acc_u, a, a_s, w_e, ws_e, n_rows + INTER, kb, H, stride_wn, stride_wsn,
                         A_FMT, DOT_SCALED, BLOCK_N, BLOCK_K, DOT_DTYPE, EVEN_K, WORDS,
                         FULL_SCALE_RANGE, W16, UPCAST, SWAP_AB)  # fmt: skip
    if SWAP_AB:
        acc_g = tl.trans(acc_g)
        acc_u = tl.trans(acc_u)

    store_ok = row_ok
    if SPLIT_K > 1:
        acc_g, acc_u, last = gate_up_split_sum(
            acc_g, acc_u, part_ptr, tile_cnt_ptr, slot64, row_ok, offs_n, n_ok, pid_m, pid_n,
            pid_s, n_slots, INTER, SPLIT_K,
        )  # fmt: skip
        store_ok = row_ok & last
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    # Round to the storage dtype first so A4 quantizes exactly what an A16 pass would store.
    act = round_bf16_rne(act, MANUAL_BF16_RNE).to(out_ptr.dtype.element_ty)
    if A4:
        packed, scales = quantize_tile(act.to(tl.float32), BLOCK_M, BLOCK_N)
        store_mx_tile(outq_ptr, outs_ptr, slot64, store_ok, pid_n, INTER, stride_outq,
                      stride_outs, packed, scales, BLOCK_N)  # fmt: skip
    else:
        tl.store(
            out_ptr + slot64[:, None] * stride_out + offs_n[None, :],
            act,
            mask=store_ok[:, None] & n_ok[None, :],
        )


@triton.jit
def _finish_tokens(
    out_ptr,
    sum_ptr,
    shared_ptr,
    counter_ptr,
    topk_ids_ptr,
    rows,
    row_ok,
    offs_n,
    n_ok,
    pid_n,
    top_k,
    stride_out,
    stride_sum,
    stride_shared,
    HAS_SHARED: tl.constexpr,
    K_PAD: tl.constexpr,
    MANUAL_BF16_RNE: tl.constexpr,
    n_slots=0,
    SPLIT_K: tl.constexpr = 1,
):
    """The top-k sum inside the down kernel, deterministic: every program that stored slot rows
    of this N tile counts them per token (one int32 counter per (token, N tile), zeroed by the
    alignment launch); the program whose arrival completes a token's valid slots sums that
    token's K per-slot rows in slot order k = 0..K-1 in fp32 (+ shared), so the result does
    not depend on which program finishes last. A program holds at most one slot per token
    (its slots share one expert; a token's top-k experts are distinct).

    With SPLIT_K > 1 every split of a slot arrives (K x SPLIT_K arrivals per token) and its
    rows are fp32 partials at split * n_slots + slot: each slot's row is their sum in split
    order, rounded to the output dtype as the unsplit per-slot row is, then summed over k."""
    tok = rows // top_k
    offs_k = tl.arange(0, K_PAD)
    k_ok = offs_k < top_k
    ids = tl.load(topk_ids_ptr + tok[:, None] * top_k + offs_k[None, :],
                  mask=row_ok[:, None] & k_ok[None, :], other=-1)  # fmt: skip
    n_valid = tl.sum((ids >= 0).to(tl.int32), axis=1)
    # Every thread's slot stores are done before any arrival is published (release at GPU scope
    # by the atomic); the last arriver's reads come after its acquire and a block barrier.
    tl.debug_barrier()
    cnt = counter_ptr + tok * tl.num_programs(1) + pid_n
    arrived = tl.atomic_add(cnt, 1, mask=row_ok, sem="acq_rel", scope="gpu")
    last = row_ok & (arrived == n_valid * SPLIT_K - 1)
    tl.debug_barrier()
    total = tl.zeros((rows.shape[0], offs_n.shape[0]), dtype=tl.float32)
    for k in range(0, top_k):
        slot_k = tok * top_k + k
        use = last & (tl.max(tl.where(offs_k[None, :] == k, ids, -1), axis=1) >= 0)
        part = tl.zeros((rows.shape[0], offs_n.shape[0]), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):
            # .cg: other programs wrote these rows; read them from L2, not a stale L1 line.
            part += tl.load(
                out_ptr + (s * n_slots + slot_k)[:, None] * stride_out + offs_n[None, :],
                mask=use[:, None] & n_ok[None, :],
                other=0.0,
                cache_modifier=".cg",
            ).to(tl.float32)
        if SPLIT_K > 1:
            part = round_bf16_rne(part, MANUAL_BF16_RNE).to(sum_ptr.dtype.element_ty)
        total += part.to(tl.float32)
    if HAS_SHARED:
        total += tl.load(shared_ptr + tok[:, None] * stride_shared + offs_n[None, :],
                         mask=last[:, None] & n_ok[None, :], other=0.0).to(tl.float32)  # fmt: skip
    tl.store(
        sum_ptr + tok[:, None] * stride_sum + offs_n[None, :],
        round_bf16_rne(total, MANUAL_BF16_RNE).to(sum_ptr.dtype.element_ty),
        mask=last[:, None] & n_ok[None, :],
    )


@triton.jit
def down_kernel(
    a_ptr,
    aq_ptr,
    as_ptr,
    w_ptr,
    ws_ptr,
    topk_w_ptr,
    out_ptr,
    sorted_ids_ptr,
    block_expert_ptr,
    num_padded_ptr,
    sum_ptr,
    shared_ptr,
    counter_ptr,
    topk_ids_ptr,
    n_slots,
    top_k,
    H,
    INTER,
    stride_a,
    stride_aq,
    stride_as,
    stride_we,
    stride_wn,
    stride_wse,
    stride_wsn,
    stride_out,
    stride_sum,
    stride_shared,
    # as gate_up_swiglu_kernel's, then the fused top-k sum's
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    A4: tl.constexpr, DOT_SCALED: tl.constexpr, A_FMT: tl.constexpr, DOT_DTYPE: tl.constexpr,
    MANUAL_BF16_RNE: tl.constexpr, WORDS: tl.constexpr = False,
    FULL_SCALE_RANGE: tl.constexpr = True, W16: tl.constexpr = False,
    UPCAST: tl.constexpr = "triton",
    FUSE_SUM: tl.constexpr = False, HAS_SHARED: tl.constexpr = False, K_PAD: tl.constexpr = 8,
    SPLIT_K: tl.constexpr = 1, SWAP_AB: tl.constexpr = False,
):  # fmt: skip
    """out[slot, n] = topk_w[slot] * (act[slot] . W2[e, n]) per slot; with FUSE_SUM also
    sum[t, n] = sum_k out[t*K + k, n] (+ shared[t, n]), summed by whichever program stores a
    token's last slot of this N tile (see `_finish_tokens`). With SPLIT_K > 1 (FUSE_SUM only)
    program (m, n, s) runs the s-th range of K blocks and stores an fp32 partial row at
    out[s * n_slots + slot] (`out` is fp32 [SPLIT_K * n_slots, H])."""
    _assume_nonneg(H, INTER, stride_a, stride_we, stride_wn, stride_wse, stride_wsn, stride_out)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return
    expert, rows, row_ok, offs_n, n_ok, n_rows = _tile_rows(
        pid_m, pid_n, sorted_ids_ptr, block_expert_ptr, n_slots, H, BLOCK_M, BLOCK_N
    )
    w_e = w_ptr + expert * stride_we
    ws_e = ws_ptr + expert * stride_wse

    if SWAP_AB:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    pid_s = tl.program_id(2)
    kb_lo, kb_hi = k_block_range(tl.cdiv(INTER, BLOCK_K), pid_s, SPLIT_K)
    for kb in range(kb_lo, kb_hi):
        a, a_s = _act_tile(
            a_ptr, aq_ptr, as_ptr, rows, kb, INTER, stride_a, stride_aq, stride_as,
            BLOCK_M, BLOCK_K, A4, DOT_SCALED, DOT_DTYPE, EVEN_K, WORDS and UPCAST == "ptx",
        )  # fmt: skip
        acc = _mx_step(acc, a, a_s, w_e, ws_e, n_rows, kb, INTER, stride_wn, stride_wsn, A_FMT,
                       DOT_SCALED, BLOCK_N, BLOCK_K, DOT_DTYPE, EVEN_K, WORDS, FULL_SCALE_RANGE,
                       W16, UPCAST, SWAP_AB)  # fmt: skip
    if SWAP_AB:
        acc = tl.trans(acc)

    weight = tl.load(topk_w_ptr + rows, mask=row_ok, other=0.0)
    acc = acc * weight[:, None]
    out_rows = rows
    if SPLIT_K == 1:
        acc = round_bf16_rne(acc, MANUAL_BF16_RNE)
    else:
        out_rows = pid_s * n_slots + rows
    tl.store(
        out_ptr + out_rows[:, None] * stride_out + offs_n[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & n_ok[None, :],
    )
    if FUSE_SUM:
        _finish_tokens(
            out_ptr, sum_ptr, shared_ptr, counter_ptr, topk_ids_ptr, rows, row_ok, offs_n, n_ok,
            pid_n, top_k, stride_out, stride_sum, stride_shared, HAS_SHARED, K_PAD,
            MANUAL_BF16_RNE, n_slots, SPLIT_K,
        )  # fmt: skip
