"""Token-to-expert alignment: group the (token, slot) pairs by expert, each expert padded to a
multiple of the kernel's BLOCK_M, so every program of the grouped GEMM reads one expert.

Vectorized torch (no loop over tokens or experts). Masked slots (id -1) are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Alignment:
    sorted_ids: torch.Tensor  # int32 [capacity]: flat slot index t*K+k, pad entries = T*K
    block_expert: torch.Tensor  # int32 [capacity // BLOCK_M]: expert of each block, -1 = unused
    num_padded: torch.Tensor  # int32 [1]: entries in use (a multiple of BLOCK_M)
    counts: torch.Tensor  # int64 [E]: real slots per expert
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
        capacity = int(num_padded.item())
    else:
        capacity = min(n_slots * block_m, n_slots + num_experts * (block_m - 1))
    capacity = max(capacity, block_m)
    capacity = (capacity + block_m - 1) // block_m * block_m

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
