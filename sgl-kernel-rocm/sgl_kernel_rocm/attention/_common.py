"""Shared plumbing for the decode-attention kernels: launch configs, split planning, scales.

No host syncs: nothing here reads a device tensor's value on the host (no .item(), int(),
bool(), .tolist() of a tensor). Sizes come from shapes or from a host-side `max_seq_len` the
caller already holds (SGLang: forward_batch.seq_lens_cpu); without one, the block table's
capacity (its row width x page size) bounds the context, which is a shape, not a value.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from sgl_kernel_rocm.arch import current_arch
from sgl_kernel_rocm.tuning import get_config

Scale = float | torch.Tensor | None  # a dequant scale: a number, a device tensor, or 1.0
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
MAX_SPLITS = 64  # bound of the runtime split count (the merge kernel's constexpr tile)


def interpreting() -> bool:
    """True when Triton runs kernels through its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def decode_heuristic(m: int) -> dict[str, Any]:
    """Config that launches anywhere: 64-token tiles, ~2 waves of programs on a big GPU.

    In the interpreter every program costs Python time, so no extra splits there.
    """
    if interpreting() or not torch.cuda.is_available():
        return {
            "BLOCK_N": 64,
            "num_warps": 4,
            "num_stages": 1,
            "target_programs": 1,
            "min_split_tokens": 256,
        }
    return gpu_decode_heuristic(m)


def gpu_decode_heuristic(m: int) -> dict[str, Any]:
    """What decode_heuristic returns on a GPU (also what the compile gate builds for an arch
    with no table)."""
    return {
        "BLOCK_N": 64,
        "num_warps": 4,
        "num_stages": 2,
        "target_programs": 264,
        "min_split_tokens": 256,
    }


def resolve_config(op: str, batch: int, shape_key: str) -> dict[str, Any]:
    """Launch config for `op` from configs/<op>/<arch>.json (see tuning.py), else the heuristic."""
    arch = "cpu" if interpreting() else current_arch()
    cfg, _ = get_config(op, arch, batch, shape_key, decode_heuristic)
    return cfg


def launch_options(cfg: dict[str, Any], q: torch.Tensor) -> dict[str, Any]:
    """What every decode launch passes besides its tiles: warps and stages from the config, and
    UPCAST (fp32 dots) in the interpreter, whose bf16 tl.dot is wrong (triton #11584), or for
    fp32 queries."""
    return {
        "UPCAST": interpreting() or q.dtype == torch.float32,
        "num_warps": int(cfg["num_warps"]),
        "num_stages": int(cfg["num_stages"]),
    }


def plan_splits(cfg: dict[str, Any], programs_per_split: int, max_len: int) -> int:
    """Flash-decoding split count: enough programs to fill the GPU, but never tiny splits.

    `max_len` is a host int (an upper bound of the longest context, or the sparse list length);
    a split that gets no token writes lse = -inf and the merge ignores it.
    """
    want = -(-int(cfg["target_programs"]) // max(1, programs_per_split))
    cap = max(1, -(-int(max_len) // int(cfg["min_split_tokens"])))
    return int(max(1, min(want, cap, MAX_SPLITS)))


def context_bound(block_table: torch.Tensor, page_size: int, max_seq_len: int | None) -> int:
    """Longest context to plan for, from host data only: the caller's `max_seq_len` when given
    (checked against what a block-table row can address), else the row's capacity."""
    capacity = int(block_table.shape[1]) * int(page_size)
    if max_seq_len is None:
        return capacity
    if max_seq_len < 0 or max_seq_len > capacity:
        raise ValueError(
            f"max_seq_len={max_seq_len} is outside [0, {capacity}] (block_table row width "
            f"{block_table.shape[1]} x page size {page_size})"
        )
    return int(max_seq_len)


def check_splits(num_splits: int | None) -> None:
    if num_splits is not None and not 1 <= int(num_splits) <= MAX_SPLITS:
        raise ValueError(f"num_splits={num_splits} is outside [1, {MAX_SPLITS}]")


def scale_vector(scale: Scale, n: int, device: torch.device) -> torch.Tensor:
    """Dequant scales as an fp32 vector of length n (one per KV head); None means 1.0.

    A python number becomes a device fill (no host-to-device copy that could wait on the
    stream); a tensor is used where it lives.
    """
    if scale is None:
        return torch.ones(n, dtype=torch.float32, device=device)
    if not isinstance(scale, torch.Tensor):
        return torch.full((n,), float(scale), dtype=torch.float32, device=device)
    t = scale.to(device=device, dtype=torch.float32).reshape(-1)
    if t.numel() == 1:
        return t.expand(n).contiguous()
    if t.numel() != n:
        raise ValueError(f"scale has {t.numel()} entries, expected 1 or {n} (one per KV head)")
    return t.contiguous()


def check_block_table(block_table: torch.Tensor, seq_lens: torch.Tensor, page_size: int) -> None:
    if block_table.dim() != 2 or seq_lens.dim() != 1:
        raise ValueError("block_table must be [batch, max_pages] and seq_lens [batch]")
    if block_table.shape[0] != seq_lens.shape[0]:
        raise ValueError(
            f"block_table has {block_table.shape[0]} rows but seq_lens has {seq_lens.shape[0]}"
        )
    if block_table.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"block_table must be int32/int64, got {block_table.dtype}")
    # Lengths are device values: they are not read here (a host sync per layer, and CUDA
    # graphs cannot capture one). context_bound() checks a host-side max_seq_len instead.
