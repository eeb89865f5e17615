"""Read facts out of compiled kernels: AMD amdgcn text, NVIDIA SASS (nvdisasm) and resource usage.

Every global load is attributed to the source line it came from (`.loc` in amdgcn, nvdisasm's
line info), so a load can be matched to the `# stream: NAME` marker on the `tl.load` line of the
kernel source. The main loop is the backward branch whose body holds the most stream loads; its
mnemonic counts feed the cost model's issue and pipe bounds (costmodel/).
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# --------------------------------------------------------------------------- shared structures


@dataclass
class Instr:
    op: str  # mnemonic, lower case for AMD, as printed for NVIDIA (predicate stripped)
    text: str
    src: tuple[str, int] | None  # (file basename, line) of the innermost source location


@dataclass
class Listing:
    instrs: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # label -> index of next instruction
    branches: list[tuple[int, str]] = field(default_factory=list)  # (index, target label)

    def loops(self) -> list[tuple[int, int]]:
        """(start, end) instruction index ranges of backward branches, end inclusive."""
        out = []
        for idx, label in self.branches:
            start = self.labels.get(label)
            if start is not None and start <= idx:
                out.append((start, idx))
        return out


# --------------------------------------------------------------------------- AMD

_AMD_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(?:\s+"([^"]*)")?')
_AMD_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_AMD_LABEL = re.compile(r"^(\.?[A-Za-z_$][\w$.]*):")
_AMD_INSTR = re.compile(r"^\s+([a-z][a-z0-9_]*)\b(.*)$")
_AMD_BRANCH = re.compile(r"^s_(?:cbranch_\w+|branch)$")
_AMD_META_INT = re.compile(
    r"^\s*(?:-\s+)?\.(vgpr_count|agpr_count|sgpr_count|vgpr_spill_count|"
    r"sgpr_spill_count|private_segment_fixed_size):\s+(\d+)"
)
_AMD_COMMENT_INT = re.compile(
    r"^; (ScratchSize|Occupancy|NumVgprs|NumAgprs|TotalNumVgprs):\s*(\d+)"
)

# Bytes per lane of an AMD global/buffer load mnemonic, from its size suffix.
_AMD_WIDTH = [
    (re.compile(r"(?:dwordx4|_b128)$"), 16),
    (re.compile(r"(?:dwordx3|_b96)$"), 12),
    (re.compile(r"(?:dwordx2|_b64)$"), 8),
    (re.compile(r"(?:dword|_b32)$"), 4),
    (re.compile(r"(?:short|_d16(?:_hi)?|_[ui]16|_b16)$"), 2),
    (re.compile(r"(?:byte|_[ui]8)$"), 1),
]


def amd_load_width(op: str) -> int | None:
    """Width in bytes of a global/buffer load, None if `op` is not a global-memory load."""
    if not re.match(r"^(?:global|buffer|flat)_load", op):
        return None
    for pattern, width in _AMD_WIDTH:
        if pattern.search(op):
            return width
    return None


def parse_amdgcn(text: str) -> tuple[Listing, dict[str, int]]:
    files: dict[str, str] = {}
    listing = Listing()
    meta: dict[str, int] = {}
    src: tuple[str, int] | None = None
    in_text = True
    for line in text.splitlines():
        if m := _AMD_META_INT.match(line):
            meta.setdefault(m.group(1), int(m.group(2)))
            continue
        if m := _AMD_COMMENT_INT.match(line):
            meta.setdefault(m.group(1), int(m.group(2)))
            continue
        stripped = line.strip()
        if stripped.startswith(".section") or stripped.startswith(".text"):
            in_text = stripped.startswith(".text") or ".text" in stripped.split(",")[0]
            continue
        if not in_text:
            continue
        if m := _AMD_FILE.match(line):
            files[m.group(1)] = Path(m.group(3) or m.group(2)).name
            continue
        if m := _AMD_LOC.match(line):
            line_no = int(m.group(2))
            src = (files.get(m.group(1), "?"), line_no) if line_no else None
            continue
        if m := _AMD_LABEL.match(line):
            listing.labels[m.group(1)] = len(listing.instrs)
            continue
        m = _AMD_INSTR.match(line)
        if not m or stripped.startswith(";"):
            continue
        op = m.group(1)
        if _AMD_BRANCH.match(op):
            target = m.group(2).split(";")[0].strip().split(",")[-1].strip()
            listing.branches.append((len(listing.instrs), target))
        listing.instrs.append(Instr(op, stripped, src))
    return listing, meta


# --------------------------------------------------------------------------- NVIDIA

_SASS_FILE = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
_SASS_LABEL = re.compile(r"^(\.L_[\w]+):")
_SASS_INSTR = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_SASS_TARGET = re.compile(r"`?\((\.L_[\w]+)\)")
_RESOURCE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def sass_load_width(op: str) -> int | None:
    """Width in bytes of a SASS global load (LDG, LDGSTS), None for other instructions."""
    parts = op.split(".")
    if parts[0] not in ("LDG", "LDGSTS"):
        return None
    for token in reversed(parts[1:]):
        if token in ("128", "64", "32"):
            return int(token) // 8
        if token in ("U8", "S8"):
            return 1
        if token in ("U16", "S16"):
            return 2
    return 4


def parse_sass(text: str) -> Listing:
    listing = Listing()
    src: tuple[str, int] | None = None
    for line in text.splitlines():
        if m := _SASS_FILE.match(line):
            src = (Path(m.group(1)).name, int(m.group(2)))
            continue
        if m := _SASS_LABEL.match(line.strip()):
            listing.labels[m.group(1)] = len(listing.instrs)
            continue
        m = _SASS_INSTR.match(line)
        if not m:
            continue
        op, args = m.group(1), m.group(2)
        if op.startswith("BRA") and (t := _SASS_TARGET.search(args)):
            listing.branches.append((len(listing.instrs), t.group(1)))
        listing.instrs.append(Instr(op, line.strip(), src))
    return listing


def nvidia_tool(name: str) -> Path:
    """ptxas/cuobjdump/nvdisasm shipped inside the Triton wheel that is being used."""
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if not path.exists():
        raise FileNotFoundError(f"{path} missing: this Triton wheel ships no {name}")
    return path


def nvidia_sass_and_resources(cubin: bytes, workdir: Path) -> tuple[str, dict[str, int]]:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "kernel.cubin"
    path.write_bytes(cubin)
    usage = subprocess.run(
        [str(nvidia_tool("cuobjdump")), "--dump-resource-usage", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # A warp-specialized kernel is several functions in one cubin: the worst of them counts.
    found = [tuple(int(v) for v in m.groups()) for m in _RESOURCE.finditer(usage)]
    if not found:
        raise RuntimeError(f"cuobjdump printed no resource usage:\n{usage}")
    res = {k: max(f[i] for f in found) for i, k in enumerate(("REG", "STACK", "SHARED", "LOCAL"))}
    sass = subprocess.run(
        [str(nvidia_tool("nvdisasm")), "-c", "-g", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sass, res


# --------------------------------------------------------------------------- facts


def stream_lines(source_files: list[Path]) -> dict[tuple[str, int], str]:
    """(file basename, line) -> stream name, from `# stream: NAME` markers in kernel sources."""
    out = {}
    for path in source_files:
        text = path.read_text()
        marks = {}
        for no, line in enumerate(text.splitlines(), 1):
            if m := re.search(r"#\s*stream:\s*(\w+)", line):
                marks[no] = m.group(1)
        # A marker covers its whole statement: compilers put a call's location on any of its
        # lines (the call, or its last argument).
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.stmt) and node.lineno in marks:
                for no in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    out[(path.name, no)] = marks[node.lineno]
    return out


# --------------------------------------------------------------------------- TTGIR

_TT_LOC_DEF = re.compile(r"^#(loc\d*) = loc\((.*)\)\s*$")
_TT_FILE_LOC = re.compile(r'^"([^"]+)":(\d+):\d+')
_TT_LAYOUT = re.compile(r"^#(\w+) = #ttg\.(blocked|linear)<\{(.*)\}>\s*$")
_TT_LOAD = re.compile(
    r"(tt\.load|async_copy_global_to_local|buffer_load_to_local|buffer_load)\b.*?"
    r"tensor<([0-9x]+)x(?:!tt\.ptr<)?(\w+)>?, #(\w+)>.*loc\(#(loc\d*)\)\s*$"
)
_ELEM_BYTES = {"i8": 1, "u8": 1, "f8E4M3FN": 1, "f8E4M3FNUZ": 1, "f8E5M2": 1, "i16": 2,
               "bf16": 2, "f16": 2, "i32": 4, "f32": 4, "i64": 8}  # fmt: skip


def _layout_vector(kind: str, body: str) -> int | None:
    """Elements each thread holds contiguously along the fastest-varying dim."""
    if kind == "blocked":
        spt = [int(x) for x in re.search(r"sizePerThread = \[([^\]]*)\]", body).group(1).split(",")]
        order = [int(x) for x in re.search(r"order = \[([^\]]*)\]", body).group(1).split(",")]
        return spt[order[0]]
    reg = re.search(r"register = \[(.*?)\]\], lane", body)
    if not reg:
        return 1
    bases = [[int(v) for v in b.split(",")] for b in re.findall(r"\[([\d, ]+)\]", reg.group(1))]
    n = 1
    for b in bases:  # [0, 1], [0, 2], [0, 4], ... along the last dim = contiguous registers
        if b[:-1] == [0] * (len(b) - 1) and b[-1] == n:
            n *= 2
        else:
            break
    return n


def ttgir_locations(ttgir: str) -> dict[str, str]:
    """TTGIR location aliases: `#locN` -> its definition text."""
    return {m.group(1): m.group(2) for line in ttgir.splitlines() if (m := _TT_LOC_DEF.match(line))}


def resolve_loc(locs: dict[str, str], name: str, depth: int = 0) -> tuple[str, int] | None:
    """(file basename, line) a TTGIR location alias points at, through call sites and names."""
    text = locs.get(name)
    if text is None or depth > 20:
        return None
    if m := _TT_FILE_LOC.match(text):
        return Path(m.group(1)).name, int(m.group(2))
    if m := re.match(r"callsite\(#(loc\d*) at", text):  # the callee is where the op is
        return resolve_loc(locs, m.group(1), depth + 1)
    if m := re.search(r"#(loc\d*)", text):  # named location: loc("q"(#locN))
        return resolve_loc(locs, m.group(1), depth + 1)
    return None


def ttgir_stream_loads(ttgir: str, streams: dict[tuple[str, int], str]) -> dict[str, dict]:
    """Global loads per stream from TTGIR, whose locations survive the passes that later merge
    a load's location into its consumer's: bytes per thread of each load (capped at 16, the
    widest single load), from its layout."""
    locs: dict[str, str] = {}
    layouts: dict[str, int | None] = {}
    for line in ttgir.splitlines():
        if m := _TT_LOC_DEF.match(line):
            locs[m.group(1)] = m.group(2)
        elif m := _TT_LAYOUT.match(line):
            layouts[m.group(1)] = _layout_vector(m.group(2), m.group(3))

    out: dict[str, dict] = {}
    for line in ttgir.splitlines():
        m = _TT_LOAD.search(line)
        if not m or m.group(3) not in _ELEM_BYTES:
            continue
        src = resolve_loc(locs, m.group(5))
        stream = streams.get(src) if src else None
        if stream is None:
            continue
        vec = layouts.get(m.group(4)) or 1
        if (c := re.search(r"contiguity = (\d+)", line)) is not None:
            vec = min(vec, int(c.group(1)))
        width = min(16, vec * _ELEM_BYTES[m.group(3)])
        out.setdefault(stream, Counter())[str(width)] += 1
    return {k: dict(v) for k, v in out.items()}


_TT_MMA = re.compile(r"^#(\w+) = #ttg\.(?:amd_mfma|nvidia_mma)<\{(.*)\}>\s*$")
_TT_DOT = re.compile(
    r"(?:tt\.dot|tt\.dot_scaled|ttng\.warp_group_dot)\b.*->\s*tensor<(\d+)x(\d+)x\w+, #(\w+)>"
)


def warp_redundancy(ttgir: str) -> float:
    """How many times the warps of a program compute the same output elements, worst dot.

    From each dot's MMA layout: warps x instruction rows (cols) that cover more than the tile's
    rows (cols) repeat work; an instruction bigger than the tile only pads, which is not counted.
    """
    mmas = {}
    for line in ttgir.splitlines():
        if m := _TT_MMA.match(line):
            wpc = re.search(r"warpsPerCTA = \[(\d+), (\d+)\]", m.group(2))
            shape = re.search(r"instrShape = \[(\d+), (\d+)", m.group(2))
            if wpc and shape:
                mmas[m.group(1)] = (*map(int, wpc.groups()), *map(int, shape.groups()))
    worst = 1.0
    for m in _TT_DOT.finditer(ttgir):
        rows, cols, layout = int(m.group(1)), int(m.group(2)), m.group(3)
        if layout not in mmas:
            continue
        wm, wn, im, in_ = mmas[layout]
        rep = (max(wm * im, rows) / max(im, rows)) * (max(wn * in_, cols) / max(in_, cols))
        worst = max(worst, rep)
    return worst


def instr_class(op: str, amd: bool) -> str:
    o = op.lower()
    if amd:
        if "mfma" in o or o.startswith("v_wmma"):
            return "mma"
        if re.match(r"^(global|buffer|flat)_", o):
            return "vmem"
        if o.startswith("ds_"):
            return "lds"
        if o.startswith("s_waitcnt") or o.startswith("s_nop") or o.startswith("s_barrier"):
            return "wait"
        if o.startswith("s_"):
            return "salu"
        return "valu"
    o = o.split(".")[0]
    if o.endswith("mma"):
        return "mma"
    if o.startswith(("ldg", "stg", "ldgsts", "utma", "ldgdepbar")):
        return "vmem"
    if o.startswith(("lds", "sts", "ldsm", "stsm")):
        return "lds"
    if o.startswith(("bar", "depbar", "warpsync", "nop")):
        return "wait"
    if o.startswith("u") and not o.startswith("utc"):
        return "salu"  # uniform datapath
    return "valu"


_AMD_MFMA_SHAPE = re.compile(r"^v_mfma(?:_scale)?_[a-z0-9]+_(\d+)x(\d+)x(\d+)")
_SASS_HMMA = re.compile(r"^HMMA\.(\d+)")  # HMMA.16816 = m16 n8 k16
_SASS_GMMA = re.compile(r"^HGMMA\.(\d+)x(\d+)x(\d+)")


def mma_macs(op: str, amd: bool) -> int | None:
    """Multiply-accumulates one warp/wave instruction performs, None if unknown."""
    if amd:
        m = _AMD_MFMA_SHAPE.match(op.lower())
        return int(m.group(1)) * int(m.group(2)) * int(m.group(3)) if m else None
    if m := _SASS_GMMA.match(op):  # a warpgroup op, listed once per warp of the group
        return int(m.group(1)) * int(m.group(2)) * int(m.group(3)) // 4
    if m := _SASS_HMMA.match(op):
        digits = m.group(1)
        shapes = {"16816": 16 * 8 * 16, "1688": 16 * 8 * 8, "884": 8 * 8 * 4}
        return shapes.get(digits)
    return None


def _mnemonic(ins: Instr, amd: bool) -> str:
    """AMD mnemonics whole; SASS opcode with the modifiers that change its pipe or rate (the
    HMMA / HGMMA shape, F2FP's pack kind), the rest dropped."""
    op = ins.op
    if amd:
        return op.lower()
    if m := re.search(r"\b([A-Z]GMMA\.\d+x\d+x\d+)", ins.text):
        return m.group(1)
    parts = op.split(".")
    if parts[0] in ("HMMA", "HGMMA", "IMMA", "F2FP", "MUFU"):
        return ".".join(parts[:2])
    return parts[0]


def facts(listing: Listing, amd: bool, streams: dict[tuple[str, int], str]) -> dict:
    """Instruction facts of one kernel: mnemonic counts, stream loads by width, main loop."""
    ops = Counter(i.op.lower() if amd else i.op.split(".")[0] for i in listing.instrs)
    loads: dict[str, Counter] = {}
    load_idx: list[tuple[int, str]] = []
    for idx, ins in enumerate(listing.instrs):
        width = amd_load_width(ins.op) if amd else sass_load_width(ins.op)
        if width is None:
            continue
        stream = streams.get(ins.src, "other") if ins.src else "other"
        loads.setdefault(stream, Counter())[str(width)] += 1
        load_idx.append((idx, stream))
    main = None
    best = 0
    for start, end in listing.loops():
        n = sum(1 for idx, s in load_idx if start <= idx <= end and s != "other")
        if n > best or (n == best and main and end - start > main[1] - main[0]):
            best, main = n, (start, end)
    if best == 0:
        # No loop load carries a `# stream:` line: SASS line info can land a few lines off the
        # load's statement (seen: +1..+4 lines after ptxas, while the TTGIR locations are
        # exact). Then the loop issuing the most global loads is the main loop.
        for start, end in listing.loops():
            n = sum(1 for idx, _ in load_idx if start <= idx <= end)
            if n > best or (n == best and main and end - start > main[1] - main[0]):
                best, main = n, (start, end)
    loop = None
    if main is not None:
        body = listing.instrs[main[0] : main[1] + 1]
        macs = [mma_macs(i.op, amd) for i in body if instr_class(i.op, amd) == "mma"]
        loop = {
            "instructions": len(body),
            "by_class": dict(Counter(instr_class(i.op, amd) for i in body)),
            # mnemonics of the body (the cost model maps them to pipes, costmodel/pipes.py)
            "ops": dict(Counter(_mnemonic(i, amd) for i in body)),
            # per warp/wave and iteration; None when an MMA shape is not understood
            "mma_macs": None if None in macs else sum(macs),
        }
    if amd:
        mma = sum(v for k, v in ops.items() if "mfma" in k)
        extra = {
            "mfma": mma,
            "mfma_scale": sum(v for k, v in ops.items() if k.startswith("v_mfma_scale")),
            "cvt_scalef32": sum(v for k, v in ops.items() if k.startswith("v_cvt_scalef32")),
            "buffer_loads": sum(v for k, v in ops.items() if k.startswith("buffer_load")),
            "exec_branches": ops.get("s_cbranch_execz", 0) + ops.get("s_cbranch_execnz", 0),
        }
    else:
        mma_ops = {k: v for k, v in ops.items() if k.endswith("MMA")}
        extra = {
            "mma": sum(mma_ops.values()),
            "mma_kinds": sorted(mma_ops),
            # packed bf16 multiplies (the "ptx" FP4 upcast's scale step, moe/_upcast.py)
            "bf16x2_mul": sum(
                1 for i in listing.instrs if i.op.startswith(("HMUL2.BF16", "HFMA2.BF16"))
            ),
        }
    return {
        "instructions": len(listing.instrs),
        "ops": dict(Counter(_mnemonic(i, amd) for i in listing.instrs)),
        "loads": {k: dict(v) for k, v in sorted(loads.items())},
        "main_loop": loop,
        **extra,
    }
