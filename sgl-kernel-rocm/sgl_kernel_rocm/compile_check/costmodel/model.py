"""Predicted time of one kernel launch from its compiled machine code and its launch grid.

The busiest unit (SM / CU) runs ceil(programs / units) programs, `r` at a time (occupancy from
registers, shared memory / LDS and warp slots), in `rounds` = ceil(programs on it / r). One
round runs the main loop `iters` times; an iteration takes the longest of these bounds (cycles,
per scheduler: NVIDIA SM sub-partition, AMD SIMD):

    issue      loop instructions x max(k, cpi)       k warps per scheduler share one issue port;
                                                    one warp alone issues every `cpi` cycles
    pipe:P     k x sum(instructions on P / rate(P))  per pipe: fma, imad, alu, cvt, sfu, lsu,
                                                    mio (shared memory), ldsm, mma (by MACs)
    latency    memory latency / (stages - 1)         Little's law: one program keeps stages - 1
               (stages 1: latency + its own issue)  iterations of bytes in flight
    unit_bw    r x bytes per iteration / bytes per clock a unit can pull

plus once per round the instructions outside the loop and one exposed latency. The launch takes
max(rounds x round + early-exit programs, HBM bytes / measured copy bandwidth) + launch overhead.
The term that sets the time is reported as the binding one.

    spill      issue + local loads/stores x spill_cycles x k   (register spills in the loop)

Free constants (cpi, latency, launch overhead, cost of an early-exit program, cycles per
spilled access) are fitted on the
H200 rows (calibrate.py); everything else is arch data (perf.json) or read from the compiled
kernel (isa.py facts).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgl_kernel_rocm.compile_check.costmodel.pipes import mma_kind, mma_macs, pipe_of

_PERF_PATH = Path(__file__).with_name("perf.json")
PERF: dict[str, Any] = json.loads(_PERF_PATH.read_text())
AMD = ("gfx950", "gfx942")


@dataclass(frozen=True)
class Launch:
    """One kernel launch at a shape: what the model needs beyond the compiled code."""

    programs: int  # programs that do work
    iters: float  # main-loop iterations per working program
    hbm_bytes: float  # unique bytes the launch moves to/from HBM
    bytes_per_iter: int  # bytes one program streams per loop iteration
    empty_programs: int = 0  # launched programs that exit at once (worst-case grids)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Prediction:
    us: float
    bound: str
    terms_us: dict[str, float] = field(default_factory=dict)
    frac_copy: float = 0.0
    rounds: int = 0
    resident: int = 0


def constants(arch: str, fit: dict[str, float] | None = None) -> dict[str, Any]:
    """Arch data with the fitted constants: `fit` overrides perf.json's; the memory latency of
    the fit is sm90's, other archs keep their documented figure."""
    c = dict(PERF[arch])
    f = dict(PERF["fit"]) | (fit or {})
    c["cpi"] = f["cpi"]
    c["launch_us"] = f["launch_us"]
    c["empty_cta_ns"] = f["empty_cta_ns"]
    c["spill_cycles"] = f["spill_cycles"]
    if arch == "sm90":
        c["latency_ns"] = f["latency_ns"]
    return c


def occupancy(rec: dict[str, Any], warps: int, arch: str, c: dict[str, Any]) -> int:
    """Programs one unit holds at once."""
    shared = int(rec.get("shared_bytes") or 0)
    regs = rec.get("regs") or {}
    by_warps = c["max_warps_per_unit"] // warps
    if arch in AMD:
        vgpr = max(1, int(regs.get("vgpr", 0)) + int(regs.get("agpr", 0)))
        vgpr = -(-vgpr // 8) * 8
        waves_per_simd = min(8, c["vgprs_per_simd_lane"] // vgpr)
        by_regs = waves_per_simd * c["schedulers_per_unit"] // warps
        by_mem = c["lds_per_unit"] // shared if shared else c["max_ctas_per_unit"]
    else:
        per_thread = max(1, int(regs.get("reg", 32)))
        per_warp = -(-per_thread * 32 // 256) * 256
        by_regs = c["regs_per_unit"] // (per_warp * warps)
        by_mem = c["smem_per_unit"] // (shared + 1024) if shared else c["max_ctas_per_unit"]
    return max(1, min(by_warps, by_regs, by_mem, c["max_ctas_per_unit"]))


def _pipe_cycles(ops: dict[str, int], arch: str, c: dict[str, Any]):
    """Cycles one warp's instructions keep each pipe of its scheduler busy, and the issue count."""
    amd = arch in AMD
    out: dict[str, float] = {}
    issue = 0
    for op, n in ops.items():
        issue += n
        pipe = pipe_of(op, amd)
        if pipe in ("ctrl", "uniform"):
            continue
        if pipe == "mma":
            macs = mma_macs(op, amd) * n
            rate = c["mma_macs_per_clk_per_unit"][mma_kind(op, amd)] / c["schedulers_per_unit"]
            out["mma"] = out.get("mma", 0.0) + macs / rate
            continue
        rate = c["rates"].get(pipe)
        if rate:
            out[pipe] = out.get(pipe, 0.0) + n / rate
    return out, issue


def predict(
    rec: dict[str, Any],
    warps: int,
    stages: int,
    arch: str,
    launch: Launch,
    fit: dict[str, float] | None = None,
    drop_term: str | None = None,
) -> Prediction:
    """Predicted time of `launch` of the kernel compiled as `rec` (isa facts, registers, shared
    memory). `drop_term` removes one bound ("issue", "latency", "pipe:cvt", "memory", ...): the
    planted faults the calibration test must catch."""
    c = constants(arch, fit)
    clk = c["clock_ghz"] * 1e3  # cycles per microsecond
    facts = rec.get("isa") or {}
    every = facts.get("ops") or {}
    loop = facts.get("main_loop")
    loop_ops = (loop or {}).get("ops") or (every if loop is None else {})
    rest = {k: v - loop_ops.get(k, 0) for k, v in every.items()} if loop else {}
    units, sched = c["units"], c["schedulers_per_unit"]
    occ = occupancy(rec, warps, arch, c)
    on_unit = -(-max(1, launch.programs) // units)
    r = min(occ, on_unit)
    rounds = -(-on_unit // r)
    k = max(1.0, r * warps / sched)
    cpi = c["cpi"]
    lat = c["latency_ns"] * 1e-3 * clk
    pipes, n_loop = _pipe_cycles(loop_ops, arch, c)
    per_iter = {"issue": n_loop * max(k, cpi)}
    # Register spills: each local load/store of the loop is a round trip through L1 that the
    # warp waits on, for every warp sharing the scheduler.
    spills = sum(n for op, n in loop_ops.items() if op in ("LDL", "STL", "SCRATCH"))
    spills += sum(n for op, n in loop_ops.items() if op.startswith("scratch_"))
    if spills:
        per_iter["spill"] = per_iter["issue"] + spills * c["spill_cycles"] * k
    per_iter.update({f"pipe:{p}": k * v for p, v in pipes.items()})
    own = n_loop * cpi
    per_iter["latency"] = lat + own if stages <= 1 else lat / (stages - 1)
    per_iter["unit_bw"] = r * launch.bytes_per_iter / c["unit_max_bytes_per_clk"]
    for name in list(per_iter):
        if name == drop_term:
            per_iter[name] = 0.0
    _, n_rest = _pipe_cycles(rest, arch, c)
    once = n_rest * max(k, cpi) + lat
    iter_cycles = max(per_iter.values())
    round_cycles = launch.iters * iter_cycles + once
    scale = rounds / clk  # cycles of one round -> microseconds over every round
    terms = {name: launch.iters * v * scale for name, v in per_iter.items()}
    terms["prologue"] = once * scale
    empty_waves = -(-launch.empty_programs // (units * occ)) if launch.empty_programs else 0
    terms["empty_programs"] = empty_waves * c["empty_cta_ns"] * 1e-3
    compute = round_cycles * scale + terms["empty_programs"]
    terms["memory"] = launch.hbm_bytes / (c["copy_tb_s"] * 1e6) if drop_term != "memory" else 0
    terms["launch"] = c["launch_us"]
    busy = max(compute, terms["memory"])
    us = busy + c["launch_us"]
    if terms["memory"] >= compute:
        bound = "memory"
    else:
        bound = max(per_iter, key=per_iter.get) if launch.iters else "prologue"
        if launch.iters * iter_cycles < once:
            bound = "prologue"
    if c["launch_us"] > busy:
        bound = "launch"
    frac = launch.hbm_bytes / (us * c["copy_tb_s"] * 1e6) if us > 0 else 0.0
    return Prediction(
        us=us,
        bound=bound,
        terms_us={k2: round(v, 3) for k2, v in terms.items()},
        frac_copy=frac,
        rounds=rounds,
        resident=r,
    )


def ratio_stats(pairs: list[tuple[float, float]]) -> dict[str, float]:
    """median |pred / meas - 1| and the worst max(pred/meas, meas/pred) over (pred, meas)."""
    if not pairs:
        return {"median_abs_rel_err": math.nan, "max_ratio": math.nan}
    errs = sorted(abs(p / m - 1) for p, m in pairs)
    mid = len(errs) // 2
    med = errs[mid] if len(errs) % 2 else (errs[mid - 1] + errs[mid]) / 2
    return {
        "median_abs_rel_err": med,
        "max_ratio": max(max(p / m, m / p) for p, m in pairs),
    }
