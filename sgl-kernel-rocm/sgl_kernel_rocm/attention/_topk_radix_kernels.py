"""Triton body of the DSA indexer's radix top-k. Callers use
`sgl_kernel_rocm.attention.topk_radix.select_topk_radix` (the wrapper).

Scores are fp32; each maps to a 32-bit key whose unsigned order is the float order. Four passes
of 8-bit digits (most significant first) each histogram the keys that still match the prefix
found so far (`tl.histogram`, 256 bins) and pick the digit where the count from the top reaches
the remaining k: after them the prefix is the k-th largest key T exactly. A last pass writes the
positions of keys > T and the first (in position order) of those == T, so exactly k distinct
positions (fewer when the row has fewer finite scores, then -1s). Output order is position
order within each group, not score order: the sparse decode does not need it sorted.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _ordered_key(x):
    """fp32 -> uint32 whose unsigned order is the float order (sign bit flipped for >= 0,
    every bit for < 0)."""
    u = x.to(tl.uint32, bitcast=True)
    return tl.where((u >> 31) == 1, u ^ 0xFFFFFFFF, u | 0x80000000)


@triton.jit
def _chunk(row, c0, n, BLOCK: tl.constexpr):
    offs = c0 + tl.arange(0, BLOCK)
    x = tl.load(row + offs, mask=offs < n, other=float("-inf"))  # stream: scores
    return offs, _ordered_key(x), (offs < n) & (x > float("-inf"))


@triton.jit
def _radix_pass(row, n, prefix, k_rem, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    """One 8-bit digit: (prefix with the digit set, k still to take among keys matching it)."""
    hist = tl.zeros([256], tl.int32)
    for c0 in range(0, n, BLOCK):
        _, key, valid = _chunk(row, c0, n, BLOCK)
        if SHIFT < 24:
            valid = valid & ((key >> (SHIFT + 8)) == (prefix >> (SHIFT + 8)))
        # Bin 0 is the highest digit, so a running sum over bins counts keys from the top.
        digit = 255 - ((key >> SHIFT) & 0xFF).to(tl.int32)
        hist += tl.histogram(digit, 256, mask=valid)
    incl = tl.cumsum(hist, 0)
    bins = tl.arange(0, 256)
    pick = tl.sum((incl < k_rem).to(tl.int32), 0)  # first bin whose running count reaches k
    above = tl.sum(tl.where(bins < pick, hist, 0), 0)
    prefix = prefix | ((255 - pick).to(tl.uint32) << SHIFT)
    return prefix, k_rem - above


@triton.jit
def _radix_topk_kernel(S, SEQ, OUT, length, k, stride_sb, stride_ob, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    row = S + b.to(tl.int64) * stride_sb
    out = OUT + b.to(tl.int64) * stride_ob
    n = tl.minimum(tl.load(SEQ + b).to(tl.int32), length)
    count = tl.zeros([], tl.int32)
    for c0 in range(0, n, BLOCK):
        _, _, valid = _chunk(row, c0, n, BLOCK)
        count += tl.sum(valid.to(tl.int32), 0)
    take = tl.minimum(count, k)
    prefix = tl.zeros([], tl.uint32)
    k_rem = take
    prefix, k_rem = _radix_pass(row, n, prefix, k_rem, 24, BLOCK)
    prefix, k_rem = _radix_pass(row, n, prefix, k_rem, 16, BLOCK)
    prefix, k_rem = _radix_pass(row, n, prefix, k_rem, 8, BLOCK)
    prefix, k_rem = _radix_pass(row, n, prefix, k_rem, 0, BLOCK)
    # prefix = T, the take-th largest key; k_rem of the keys == T are taken.
    n_gt = tl.zeros([], tl.int32)
    n_eq = tl.zeros([], tl.int32)
    for c0 in range(0, n, BLOCK):
        offs, key, valid = _chunk(row, c0, n, BLOCK)
        gt = valid & (key > prefix) & (take > 0)
        eq = valid & (key == prefix) & (take > 0)
        gt_slot = n_gt + tl.cumsum(gt.to(tl.int32), 0) - 1
        eq_rank = n_eq + tl.cumsum(eq.to(tl.int32), 0) - 1
        tl.store(out + gt_slot, offs, mask=gt)
        tl.store(out + (take - k_rem) + eq_rank, offs, mask=eq & (eq_rank < k_rem))
        n_gt += tl.sum(gt.to(tl.int32), 0)
        n_eq += tl.sum(eq.to(tl.int32), 0)
    for c0 in range(0, k, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.full([BLOCK], -1, tl.int32), mask=(offs >= take) & (offs < k))
