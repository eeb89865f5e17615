"""RETIRED (issue 20): the cost model (costmodel/) replaced this ceiling in the tuner, the
reports and the docs; it is kept only while test_compile_gate.py still checks it, and nothing
else imports it. It was 3-4x optimistic against the H200 (docs/kernels.md).

Static issue-bound bandwidth ceiling: the bytes/s a kernel could stream if memory were free.

One program loads `stream_bytes_per_iter` bytes of its stream (weights, KV) per main-loop
iteration, and each of its warps/waves issues the loop body's N instructions to get them. A
compute unit (CU/SM) issues at most `issue_per_unit_per_cycle` warp instructions per cycle, so

    ceiling = bytes_per_iter * issue_rate * units * clock / (warps * N).

An ESTIMATE from static instruction counts: it ignores dual issue, instruction latency, MFMA/MMA
pipeline occupancy and memory itself; it says whether a kernel can be memory-bound at all
(ceiling above the HBM peak) or is bound by its own instruction stream first.
"""

from __future__ import annotations

from typing import Any

from sgl_kernel_rocm.compile_check.archs import ARCHS
from sgl_kernel_rocm.compile_check.cases import Case


def static_ceiling(case: Case, rec: dict[str, Any]) -> dict[str, float] | None:
    """{"tb_s": ceiling, "hbm_tb_s": peak, "ratio": ceiling / peak}, or None when the case
    streams nothing."""
    facts = rec.get("isa") or {}
    if not facts.get("mma", facts.get("mfma", 1)):
        # A kernel whose dots left no matrix instruction in the listing we read (e.g. a
        # warp-specialized build whose partitions we do not follow): no honest estimate.
        return None
    # A kernel without a loop (one tile per program, e.g. the DSA indexer) streams its bytes
    # once: its whole instruction stream is the "iteration".
    loop = facts.get("main_loop") or {"instructions": facts.get("instructions", 0)}
    if not case.stream_bytes_per_iter or not loop["instructions"]:
        return None
    arch = ARCHS[case.arch]
    warps = case.num_warps
    cycles = warps * loop["instructions"] / arch["issue_per_unit_per_cycle"]
    bytes_per_cycle = case.stream_bytes_per_iter / cycles
    tb_s = bytes_per_cycle * arch["units"] * arch["clock_ghz"] * 1e9 / 1e12
    return {
        "tb_s": round(tb_s, 2),
        "hbm_tb_s": arch["hbm_tb_s"],
        "ratio": round(tb_s / arch["hbm_tb_s"], 2),
    }
