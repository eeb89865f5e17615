"""The compile gate: what every compiled kernel of the matrix must satisfy, as violations."""

from __future__ import annotations

from typing import Any

from sgl_kernel_rocm.compile_check.archs import ARCHS, is_amd
from sgl_kernel_rocm.compile_check.cases import Case

WIDE_BYTES = 16  # dwordx4 / LDG.128 / 16-byte cp.async


def violations(case: Case, rec: dict[str, Any]) -> list[str]:
    """Reasons this case fails the gate (empty when it passes)."""
    where = f"{case.kernel} [{case.label}] on {case.arch} with {case.config()}"
    if not rec.get("ok"):
        lines = [ln for ln in (rec.get("error") or "unknown error").strip().splitlines() if ln]
        # The first line names the error and place, the last the compiler's reason.
        reason = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1].strip()}"
        return [f"{where}: does not compile: {reason[:700]}"]
    out = []
    spills = rec["spills"]
    if any(spills.values()):
        out.append(f"{where}: spills {spills}")
    arch = ARCHS[case.arch]
    shared = rec["shared_bytes"]
    budget = arch["lds_bytes"] if is_amd(case.arch) else arch["smem_bytes"]
    if shared > budget:
        kind = "LDS" if is_amd(case.arch) else "shared memory"
        out.append(f"{where}: {kind} {shared} B exceeds the {budget} B budget")
    facts = rec["isa"]
    rep = rec.get("warp_redundancy", 1.0)
    if "whole_warps" in case.expect and rep > 1.05:
        out.append(
            f"{where}: its {case.num_warps} warps compute each output tile {rep:.0f} times "
            "(the tile is too small for the warps: fewer warps or a bigger tile)"
        )
    for need in case.expect:
        if need == "mfma_scale" and not facts.get("mfma_scale"):
            out.append(f"{where}: W4A4 without v_mfma_scale (native scaled MFMA)")
        elif need == "cvt_scalef32" and not facts.get("cvt_scalef32"):
            out.append(f"{where}: W4A16 without v_cvt_scalef32 (hardware FP4 upcast)")
        elif need == "bf16x2_mul" and not facts.get("bf16x2_mul"):
            out.append(f"{where}: no packed bf16 multiply (HMUL2.BF16) from the PTX FP4 upcast")
        elif need == "wide_stream":
            out += _stream_width(where, case.stream, facts, rec.get("ttgir_loads") or {})
        elif need == "convert_once":
            for stream, times in sorted((rec.get("ttgir_converts") or {}).items()):
                if times > 1:
                    out.append(
                        f"{where}: converts each '{stream}' tile {times} times per iteration "
                        "(a convert copied into each dot operand's layout; convert the tile "
                        "once, as attention/fp8_bits.py does)"
                    )
    return out


def _stream_width(where: str, stream: str, facts: dict, ttgir_loads: dict) -> list[str]:
    """The stream's loads must be 16 bytes wide. Machine-code loads keep their source line
    unless a pass merged it into the consumer's; TTGIR keeps it always. Both count where found,
    so a narrow load in either view fails."""
    isa_w = facts["loads"].get(stream, {})
    tt_w = ttgir_loads.get(stream, {})
    widths = [int(w) for w in isa_w] + [int(w) for w in tt_w]
    if not widths:
        return [f"{where}: no global load attributed to the '{stream}' stream"]
    if min(widths) < WIDE_BYTES:
        return [
            f"{where}: '{stream}' stream loads are {min(widths)} B wide (want {WIDE_BYTES} B): "
            f"machine code {isa_w or '-'}, TTGIR {tt_w or '-'}"
        ]
    return []
