"""Split-K of the fused MoE's grouped GEMMs (decode grids smaller than the chip): a third grid
axis cuts the K loop into SPLIT_K contiguous ranges of K blocks; each split stores an fp32
partial tile, and the program whose arrival completes a tile sums the partials in split order
0..SPLIT_K-1, so the result does not depend on which split finishes last (deterministic).
The arrival counters are zeroed by the alignment launch: no extra launch, no host sync.

gate_up: one int32 counter per (M block, N tile); the last split applies SwiGLU to the sums.
down: the existing per-(token, N tile) counter of the fused top-k sum counts every split of
every slot (`down_kernel` / `_finish_tokens`), so no second reduction step is needed.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def k_block_range(n_kb, pid_s, SPLIT_K: tl.constexpr):
    """K blocks [lo, hi) of split `pid_s`: contiguous ranges of cdiv(n_kb, SPLIT_K) blocks; the
    last splits may get fewer or none (ragged K), and still arrive with a zero partial."""
    if SPLIT_K == 1:
        lo = 0
        hi = n_kb
    else:
        per = tl.cdiv(n_kb, SPLIT_K)
        lo = tl.minimum(pid_s * per, n_kb)
        hi = tl.minimum(lo + per, n_kb)
    return lo, hi


@triton.jit
def gate_up_split_sum(
    acc_g, acc_u, part_ptr, cnt_ptr, slot64, row_ok, offs_n, n_ok, pid_m, pid_n, pid_s,
    n_slots, INTER, SPLIT_K: tl.constexpr,
):  # fmt: skip
    """Store this split's gate/up partials (fp32 [SPLIT_K, n_slots, 2 * INTER]: gate columns,
    then up columns), count the arrival on the tile's counter, and return (gate, up, last):
    the sums over every split in split order when this program arrived last (`last`), else
    values the caller must not store."""
    row = (pid_s * n_slots + slot64) * (2 * INTER)
    ok = row_ok[:, None] & n_ok[None, :]
    ptrs = part_ptr + row[:, None] + offs_n[None, :]
    tl.store(ptrs, acc_g, mask=ok)
    tl.store(ptrs + INTER, acc_u, mask=ok)
    # Every thread's partial stores are done before the arrival is published (release at GPU
    # scope); the last arriver's reads come after its acquire and a block barrier.
    tl.debug_barrier()
    arrived = tl.atomic_add(cnt_ptr + pid_m * tl.num_programs(1) + pid_n, 1, sem="acq_rel",
                            scope="gpu")  # fmt: skip
    last = arrived == SPLIT_K - 1
    tl.debug_barrier()
    use = ok & last
    gate = tl.zeros(acc_g.shape, dtype=tl.float32)
    up = tl.zeros(acc_u.shape, dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        base = part_ptr + ((s * n_slots + slot64) * (2 * INTER))[:, None] + offs_n[None, :]
        # .cg: other programs wrote these partials; read them from L2, not a stale L1 line.
        gate += tl.load(base, mask=use, other=0.0, cache_modifier=".cg")
        up += tl.load(base + INTER, mask=use, other=0.0, cache_modifier=".cg")
    return gate, up, last
