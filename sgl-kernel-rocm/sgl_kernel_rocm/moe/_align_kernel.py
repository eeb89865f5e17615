"""Token-to-expert alignment as one Triton kernel (one program): the GPU path of
`align.align_tokens` at decode sizes, replacing ~20 small torch launches with one.

Same output as the torch version (align.py, kept as the reference): slots sorted by expert,
stable, each expert's run padded to BLOCK_M, pad entries = n_slots, the expert of each block
(-1 past the end) and the padded total. Buffers are sized for the worst case by the caller, so
there is no host sync and the launch shape depends only on shapes (CUDA-graph safe). It also
zeroes the down kernel's per-(token, N tile) arrival counters, and its programs past the first
write the output rows of tokens that no expert block will reach (every top-k id -1).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _write_unrouted_row(
    ids_ptr,
    out_ptr,
    shared_ptr,
    tok,
    top_k,
    hidden,
    stride_out,
    stride_shared,
    K_PAD: tl.constexpr,
    BLOCK_H: tl.constexpr,
    HAS_SHARED: tl.constexpr,
):
    """Token `tok`'s output row when all its top-k ids are -1 (its experts live on other EP
    ranks, or it is a DP-attention pad row): zeros, or the shared-expert output. Such a token
    stores no slot, so the down kernel's top-k sum never reaches it; no other program writes
    this row."""
    offs_k = tl.arange(0, K_PAD)
    ids = tl.load(ids_ptr + tok * top_k + offs_k, mask=offs_k < top_k, other=-1)
    unrouted = tl.max(ids, axis=0) < 0
    tok64 = tok.to(tl.int64)
    for h0 in range(0, hidden, BLOCK_H):
        offs_h = h0 + tl.arange(0, BLOCK_H)
        ok = unrouted & (offs_h < hidden)
        row = tl.zeros((BLOCK_H,), dtype=tl.float32)
        if HAS_SHARED:
            row += tl.load(shared_ptr + tok64 * stride_shared + offs_h, mask=ok,
                           other=0.0).to(tl.float32)  # fmt: skip
        tl.store(out_ptr + tok64 * stride_out + offs_h, row.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def moe_align_kernel(
    ids_ptr,
    sorted_ids_ptr,
    block_expert_ptr,
    num_padded_ptr,
    counter_ptr,
    out_ptr,
    shared_ptr,
    n_slots,
    num_experts,
    capacity,
    n_counters,
    top_k,
    hidden,
    stride_out,
    stride_shared,
    BLOCK_M: tl.constexpr,
    E_PAD: tl.constexpr,
    CHUNK: tl.constexpr,
    K_PAD: tl.constexpr = 8,
    BLOCK_H: tl.constexpr = 1024,
    HAS_SHARED: tl.constexpr = False,
):
    """Program 0 aligns; program 1 + t (launched only when the caller passes an output) writes
    token t's row if the token has no valid slot (`_write_unrouted_row`)."""
    pid = tl.program_id(0)
    if pid > 0:
        _write_unrouted_row(
            ids_ptr, out_ptr, shared_ptr, pid - 1, top_k, hidden, stride_out, stride_shared,
            K_PAD, BLOCK_H, HAS_SHARED,
        )  # fmt: skip
        return
    offs_e = tl.arange(0, E_PAD)
    lanes = tl.arange(0, CHUNK)
    # 1. Slots per expert (masked ids -1 and ids >= num_experts count nowhere).
    counts = tl.zeros((E_PAD,), dtype=tl.int32)
    for c0 in range(0, n_slots, CHUNK):
        offs = c0 + lanes
        ids = tl.load(ids_ptr + offs, mask=offs < n_slots, other=-1).to(tl.int32)
        hit = ids[:, None] == offs_e[None, :]
        counts += tl.sum(hit.to(tl.int32), axis=0)
    counts = tl.where(offs_e < num_experts, counts, 0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    pad_end = tl.cumsum(padded, axis=0)
    pad_start = pad_end - padded
    total = tl.sum(padded, axis=0)
    tl.store(num_padded_ptr, total)

    # 2. Pad entries everywhere, then (after a barrier) each slot at its place.
    for c0 in range(0, capacity, CHUNK):
        offs = c0 + lanes
        pads = tl.zeros((CHUNK,), tl.int32) + n_slots
        tl.store(sorted_ids_ptr + offs, pads, mask=offs < capacity)
    for c0 in range(0, n_counters, CHUNK):
        offs = c0 + lanes
        tl.store(counter_ptr + offs, tl.zeros((CHUNK,), tl.int32), mask=offs < n_counters)
    tl.debug_barrier()
    seen = tl.zeros((E_PAD,), dtype=tl.int32)  # slots of each expert placed by earlier chunks
    for c0 in range(0, n_slots, CHUNK):
        offs = c0 + lanes
        ids = tl.load(ids_ptr + offs, mask=offs < n_slots, other=-1).to(tl.int32)
        hit = (ids[:, None] == offs_e[None, :]) & (offs_e < num_experts)[None, :]
        hit_i = hit.to(tl.int32)
        # Stable rank inside the chunk: earlier lanes with the same expert.
        before = tl.cumsum(hit_i, axis=0) - hit_i
        rank = tl.sum(tl.where(hit, before + seen[None, :] + pad_start[None, :], 0), axis=1)
        ok = (tl.sum(hit_i, axis=1) > 0) & (offs < n_slots)
        tl.store(sorted_ids_ptr + rank, offs, mask=ok)
        seen += tl.sum(hit_i, axis=0)

    # 3. Expert of each block: the number of experts whose padded run ends at or before it.
    for b0 in range(0, capacity // BLOCK_M, CHUNK):
        blocks = b0 + lanes
        start = blocks * BLOCK_M
        ends_before = (pad_end[None, :] <= start[:, None]) & (offs_e < num_experts)[None, :]
        expert = tl.sum(ends_before.to(tl.int32), axis=1)
        expert = tl.where(start < total, expert, -1)
        tl.store(block_expert_ptr + blocks, expert, mask=blocks < capacity // BLOCK_M)
