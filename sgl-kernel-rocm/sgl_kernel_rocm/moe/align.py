"""Token-to-expert alignment: group the (token, slot) pairs by expert, each expert padded to a
multiple of the kernel's BLOCK_M, so every program of the grouped GEMM reads one expert.

Vectorized torch (no loop over tokens or experts), the reference; `align_tokens_triton` does the
same in one Triton launch for the GPU's decode path. Masked slots (id -1) are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Alignment:
    sorted_ids: torch.Tensor  # int32 [capacity]: flat slot index t*K+k, pad entries = T*K
    block_expert: torch.Tensor  # int32 [capacity // BLOCK_M]: expert of each block, -1 = unused
    num_padded: torch.Tensor  # int32 [1]: entries in use (a multiple of BLOCK_M)
    counts: torch.Tensor | None  # int64 [E]: real slots per expert (torch version only)
    block_m: int

    @property
    def num_blocks_bound(self) -> int:
        return self.block_expert.numel()


def align_tokens(topk_ids: torch.Tensor, num_experts: int, block_m: int, exact: bool) -> Alignment:
    """Sort flat slots by expert and pad each expert's run to a multiple of `block_m`.

    exact=True sizes the buffers to what is used (one host sync: good for CPU / interpreter);
    exact=False sizes them to the worst case so the GPU path needs no sync.
    """
    flat = topk_ids.reshape(-1).to(torch.int64)
    n_slots = flat.numel()
    device = flat.device
    valid = (flat >= 0) & (flat < num_experts)
    key = torch.where(valid, flat, torch.full_like(flat, num_experts))
    order = torch.argsort(key, stable=True)
    counts = torch.bincount(key, minlength=num_experts + 1)[:num_experts]
    padded = (counts + block_m - 1) // block_m * block_m
    pad_start = torch.cumsum(padded, 0) - padded  # where each expert's run begins in the output
    real_start = torch.cumsum(counts, 0) - counts  # where it begins in `order`
    num_padded = padded.sum()

    if exact:
        capacity = max(int(num_padded.item()), block_m)
        capacity = (capacity + block_m - 1) // block_m * block_m
    else:
        capacity = worst_case_capacity(n_slots, num_experts, block_m)

    sorted_ids = torch.full((capacity,), n_slots, dtype=torch.int32, device=device)
    n_valid = int(valid.sum().item()) if exact else None
    keys_sorted = key[order]
    in_use = keys_sorted < num_experts
    e_sorted = keys_sorted.clamp(max=num_experts - 1)
    rank = torch.arange(n_slots, device=device) - real_start[e_sorted]
    dest = pad_start[e_sorted] + rank
    if n_valid is not None:
        sorted_ids[dest[:n_valid]] = order[:n_valid].to(torch.int32)
    else:
        dest = torch.where(in_use, dest, torch.full_like(dest, capacity))
        buf = torch.full((capacity + 1,), n_slots, dtype=torch.int32, device=device)
        buf.scatter_(0, dest, order.to(torch.int32))
        sorted_ids = buf[:capacity]

    n_blocks = capacity // block_m
    block_start = torch.arange(n_blocks, device=device) * block_m
    pad_end = pad_start + padded
    # Expert of block b: the first expert whose padded run ends after b's start.
    block_expert = torch.searchsorted(pad_end, block_start, right=True)
    block_expert = torch.where(
        block_start < num_padded, block_expert, torch.full_like(block_expert, -1)
    ).to(torch.int32)
    return Alignment(
        sorted_ids=sorted_ids,
        block_expert=block_expert,
        num_padded=num_padded.reshape(1).to(torch.int32),
        counts=counts,
        block_m=block_m,
    )


# Slots up to which the one-program Triton alignment is used (decode and small prefill); it
# loops over the slots in chunks, so past this the torch version's parallel sort is faster.
TRITON_ALIGN_MAX_SLOTS = 8192
# Slots per step of the one-program alignment: its [CHUNK, experts] compare tiles must fit the
# registers of ALIGN_NUM_WARPS warps at 256 experts (the compile gate checks it).
ALIGN_CHUNK = 16
ALIGN_NUM_WARPS = 4  # its launch; the compile case builds the same


def worst_case_capacity(n_slots: int, num_experts: int, block_m: int) -> int:
    """Entries of the sorted-id buffer that no routing can overflow (a multiple of block_m)."""
    capacity = max(min(n_slots * block_m, n_slots + num_experts * (block_m - 1)), block_m)
    return (capacity + block_m - 1) // block_m * block_m


def align_tokens_triton(
    topk_ids: torch.Tensor,
    num_experts: int,
    block_m: int,
    counters: torch.Tensor | None = None,
    empty=torch.empty,
    unrouted_out: torch.Tensor | None = None,
    shared_output: torch.Tensor | None = None,
) -> Alignment:
    """`align_tokens(..., exact=False)` in one Triton launch (worst-case sized, no host sync).

    `counters` (int32, any size) is zeroed by the same launch: the down kernel's arrival
    counters. With `unrouted_out` [T, H], the same launch also writes the rows of tokens whose
    every top-k id is -1: zeros, or `shared_output`'s row. `counts` of the result is not
    computed here (None)."""
    import triton

    from sgl_kernel_rocm.moe._align_kernel import moe_align_kernel

    ids = topk_ids.reshape(-1)
    if not ids.is_contiguous():
        ids = ids.contiguous()
    n_slots = ids.numel()
    device = ids.device
    capacity = worst_case_capacity(n_slots, num_experts, block_m)
    sorted_ids = empty((capacity,), dtype=torch.int32, device=device)
    block_expert = empty((capacity // block_m,), dtype=torch.int32, device=device)
    num_padded = empty((1,), dtype=torch.int32, device=device)
    if counters is None:
        counters = sorted_ids[:0]
    top_k = topk_ids.shape[-1] if topk_ids.dim() > 1 else 1
    out = unrouted_out if unrouted_out is not None else counters
    shared = shared_output if shared_output is not None else out
    n_rows = unrouted_out.shape[0] if unrouted_out is not None else 0
    hidden = unrouted_out.shape[1] if unrouted_out is not None else 0
    moe_align_kernel[(1 + n_rows,)](
        ids,
        sorted_ids,
        block_expert,
        num_padded,
        counters,
        out,
        shared,
        n_slots,
        num_experts,
        capacity,
        counters.numel(),
        top_k,
        hidden,
        out.stride(0),
        shared.stride(0),
        BLOCK_M=block_m,
        E_PAD=triton.next_power_of_2(max(num_experts, 16)),
        CHUNK=ALIGN_CHUNK,
        K_PAD=triton.next_power_of_2(top_k),
        BLOCK_H=min(1024, triton.next_power_of_2(max(hidden, 16))),
        HAS_SHARED=shared_output is not None,
        num_warps=ALIGN_NUM_WARPS,
    )
    return Alignment(
        sorted_ids=sorted_ids,
        block_expert=block_expert,
        num_padded=num_padded,
        counts=None,
        block_m=block_m,
    )
