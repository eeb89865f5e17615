"""Which execution pipe a machine instruction issues to, and how many multiply-accumulates a
matrix instruction does: the per-pipe counts the cost model's issue bounds are built from."""

from __future__ import annotations

import re

# SASS opcodes (as isa._mnemonic keeps them) by pipe; anything unlisted that is not uniform
# (U*) or control goes to the integer ALU.
_SASS = {
    "fma": ("FFMA", "FMUL", "FADD", "HFMA2", "HMUL2", "HADD2", "FSWZADD", "HMNMX2"),
    "imad": ("IMAD", "IMUL", "IDP", "IMADSP"),
    "cvt": ("F2F", "F2FP", "I2F", "F2I", "I2FP", "F2IP", "FRND", "I2I"),
    "sfu": ("MUFU",),
    "lsu": (
        "LDG",
        "STG",
        "LDGSTS",
        "RED",
        "REDG",
        "ATOM",
        "ATOMG",
        "LDL",
        "STL",
        "LD",
        "ST",
        "UTMALDG",
        "UBLKCP",
    ),
    "mio": ("LDS", "STS", "SHFL", "ATOMS", "S2R", "STSM"),
    "ldsm": ("LDSM",),
    "ctrl": (
        "BRA",
        "BAR",
        "DEPBAR",
        "NOP",
        "EXIT",
        "WARPSYNC",
        "WARPGROUP",
        "LDGDEPBAR",
        "YIELD",
        "BSSY",
        "BSYNC",
        "RET",
        "CALL",
        "MEMBAR",
        "ERRBAR",
        "CCTL",
        "ELECT",
        "SYNCS",
        "FENCE",
        "ACQBULK",
        "UCGABAR_ARV",
        "UCGABAR_WAIT",
    ),
}
_SASS_PIPE = {op: pipe for pipe, ops in _SASS.items() for op in ops}

_AMD_MFMA = re.compile(r"^v_mfma(?:_scale)?_[a-z0-9]+_(\d+)x(\d+)x(\d+)")
_AMD_MFMA_FMT = re.compile(r"(f8f6f4|fp8|bf8|i8|bf16|f16|f32|xf32|f64)")
_SASS_HMMA = {"HMMA.16816": 16 * 8 * 16, "HMMA.1688": 16 * 8 * 8, "HMMA.884": 8 * 8 * 4}


def pipe_of(op: str, amd: bool) -> str:
    """'fma', 'imad', 'alu', 'cvt', 'sfu', 'lsu', 'mio', 'ldsm', 'mma', 'salu', 'uniform' or
    'ctrl' (issues, occupies no pipe the model bounds)."""
    if amd:
        if op.startswith("v_mfma") or op.startswith("v_wmma") or op.startswith("v_smfmac"):
            return "mma"
        if re.match(r"^(global|buffer|flat|scratch)_", op):
            return "lsu"
        if op.startswith("ds_"):
            return "mio"
        if op.startswith(
            (
                "s_waitcnt",
                "s_nop",
                "s_barrier",
                "s_branch",
                "s_cbranch",
                "s_endpgm",
                "s_setprio",
                "s_sleep",
            )
        ):
            return "ctrl"
        if op.startswith("s_"):
            return "salu"
        if re.match(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)_", op):
            return "sfu"
        if op.startswith("v_cvt"):
            return "cvt"
        if re.match(r"^v_(pk_)?(fma|mul|add|sub|mad|fmac|max|min)_f(16|32|64)", op):
            return "fma"
        return "alu"
    base = op.split(".")[0]
    if base.endswith("MMA") or base in ("HGMMA", "QGMMA", "IGMMA", "UTCMMA", "UTCHMMA"):
        return "mma"
    if base in _SASS_PIPE:
        return _SASS_PIPE[base]
    if base.startswith("U"):
        return "uniform"
    return "alu"


def mma_kind(op: str, amd: bool) -> str:
    """Which matrix rate an instruction runs at: AMD by operand format, NVIDIA by issue form."""
    if amd:
        if op.startswith("v_mfma_scale"):
            return "fp4"  # f8f6f4 with scales: counted at the FP4 rate (the kernels use e2m1)
        m = _AMD_MFMA_FMT.search(op)
        fmt = m.group(1) if m else "bf16"
        return "fp8" if fmt in ("fp8", "bf8", "i8", "f8f6f4") else "bf16"
    return "wgmma" if "GMMA" in op else "mma_sync"


def mma_macs(op: str, amd: bool, text: str = "") -> int:
    """Multiply-accumulates of one warp/wave instruction (a warpgroup op counts a quarter per
    warp, as the listing repeats it per warp); 0 when the shape is not known."""
    if amd:
        m = _AMD_MFMA.match(op)
        return int(m.group(1)) * int(m.group(2)) * int(m.group(3)) if m else 0
    if op in _SASS_HMMA:
        return _SASS_HMMA[op]
    m = re.search(r"GMMA\.(\d+)x(\d+)x(\d+)", text or op)
    if m:
        return int(m.group(1)) * int(m.group(2)) * int(m.group(3)) // 4
    return 0
