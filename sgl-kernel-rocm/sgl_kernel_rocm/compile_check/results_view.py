"""Render matrix results: a console table, JSON, and the markdown page docs/kernels-compile.md."""

from __future__ import annotations

import datetime
import platform
from typing import Any

from sgl_kernel_rocm.compile_check.archs import ARCHS, is_amd
from sgl_kernel_rocm.compile_check.cases import Case
from sgl_kernel_rocm.compile_check.gate import violations


def rows(cases: list[Case], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for case, rec in zip(cases, results, strict=True):
        out.append(
            {
                "kernel": case.kernel,
                "arch": case.arch,
                "label": case.label,
                "config": case.config(),
                "result": rec,
                "violations": violations(case, rec),
            }
        )
    return out


def _regs(row) -> str:
    r = row["result"].get("regs", {})
    if is_amd(row["arch"]):
        return f"v{r.get('vgpr')}/a{r.get('agpr')}/s{r.get('sgpr')}"
    return f"r{r.get('reg')}"


def _spill(row) -> str:
    s = row["result"].get("spills", {})
    return "0" if not any(s.values()) else ",".join(f"{k}={v}" for k, v in s.items() if v)


def _isa(row) -> str:
    f = row["result"].get("isa", {})
    if is_amd(row["arch"]):
        bits = [f"mfma {f.get('mfma', 0)}"]
        if f.get("mfma_scale"):
            bits.append(f"mfma_scale {f['mfma_scale']}")
        if f.get("cvt_scalef32"):
            bits.append(f"cvt_scalef32 {f['cvt_scalef32']}")
        bits.append(f"buffer_loads {f.get('buffer_loads', 0)}")
    else:
        bits = [f"mma {f.get('mma', 0)} {'/'.join(f.get('mma_kinds', []))}".strip()]
    rep = row["result"].get("warp_redundancy", 1.0)
    if rep > 1.05:
        bits.append(f"warps repeat tile x{rep:.0f}")
    return ", ".join(bits)


def _loads(row) -> str:
    loads = row["result"].get("isa", {}).get("loads", {})
    parts = []
    for stream, widths in loads.items():
        if stream == "other":
            continue
        parts.append(f"{stream} " + "+".join(f"{n}x{w}B" for w, n in sorted(widths.items())))
    return "; ".join(parts)


def _cfg(cfg: dict) -> str:
    short = {"BLOCK_M": "M", "BLOCK_N": "N", "BLOCK_K": "K", "BLOCK_H": "H", "BLOCK_HI": "H",
             "BLOCK_C": "C", "BLOCK_R": "R", "BLOCK_DV": "DV", "BLOCK_S": "S", "BLOCK_D": "D",
             "num_warps": "w", "num_stages": "s"}  # fmt: skip
    return " ".join(f"{short.get(k, k)}{v}" for k, v in cfg.items())


HEADER = ["kernel", "arch", "path/shape", "config", "ok", "regs", "spills", "LDS/SMEM",
          "stream loads", "ISA", "loop instr"]  # fmt: skip


def _loop(row) -> str:
    loop = row["result"].get("isa", {}).get("main_loop")
    return str(loop["instructions"]) if loop else "-"


def cells(row) -> list[str]:
    rec = row["result"]
    return [
        row["kernel"],
        row["arch"],
        row["label"],
        _cfg(row["config"]),
        "yes" if rec.get("ok") else "NO",
        _regs(row) if rec.get("ok") else "-",
        _spill(row) if rec.get("ok") else "-",
        str(rec.get("shared_bytes", "-")),
        _loads(row),
        _isa(row) if rec.get("ok") else "-",
        _loop(row) if rec.get("ok") else "-",
    ]


def console_table(table: list[dict]) -> str:
    body = [HEADER] + [cells(r) for r in table]
    widths = [max(len(r[i]) for r in body) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in body]
    return "\n".join(lines)


def stamp(triton_version: str) -> dict[str, str]:
    return {
        "date": datetime.date.today().isoformat(),
        "triton": triton_version,
        "host": f"{platform.machine()} {platform.system()}, {platform.python_version()}, no GPU "
        "(compile only: triton.compile for each target)",
    }


def markdown_section(table: list[dict], st: dict[str, str]) -> str:
    """One Triton version's part of docs/kernels-compile.md."""
    n_bad = sum(1 for r in table if r["violations"])
    lines = [
        f"## Triton {st['triton']} ({st['date']})",
        "",
        f"{len(table)} compiled kernels; gate: "
        + ("**pass**" if not n_bad else f"**{n_bad} fail**")
        + f". Host: {st['host']}.",
        "",
        "Every compiled kernel:",
        "",
    ]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    for r in table:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells(r)) + " |")
    bad = [v for r in table for v in r["violations"]]
    if bad:
        lines += ["", "Gate violations:", ""] + [f"- {v}" for v in bad]
    return "\n".join(lines) + "\n"


def arch_table() -> str:
    lines = ["| arch | product | units | clock GHz | HBM TB/s | memory budget |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, a in ARCHS.items():
        mem = f"LDS {a['lds_bytes']} B" if is_amd(name) else f"SMEM {a['smem_bytes']} B"
        lines.append(f"| {name} | {a['product']} | {a['units']} | {a['clock_ghz']} | "
                     f"{a['hbm_tb_s']} | {mem} |")  # fmt: skip
    return "\n".join(lines)
