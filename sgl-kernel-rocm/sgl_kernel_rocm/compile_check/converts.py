"""Does a kernel convert one loaded tile more than once per iteration? Read from TTGIR.

Triton's layout passes copy a cheap elementwise op (an FP8 convert, the integer ops of a bit
move) into the layout of each of its consumers, so a tile read by two dots (MLA: as K^T for the
scores and as V for the output) was converted twice, once per dot operand layout
(docs/kernels-attention.md). The gate demands "convert_once" of the attention kernels.
"""

from __future__ import annotations

import re
from collections import Counter

from sgl_kernel_rocm.compile_check.isa import resolve_loc, ttgir_locations

_OP = re.compile(r"^\s*(%[\w.-]+)(?::\d+)? = ([a-z_]+\.[\w.]+)\b(.*)$")
_LOC = re.compile(r"loc\(#(loc\d*)\)\s*$")
# Ops that only move or view a tile: layout, shared memory, shape, same-width reinterpretation.
VIEWS = {
    "ttg.convert_layout", "ttg.local_alloc", "ttg.local_load", "ttg.memdesc_trans",
    "ttg.memdesc_subview", "ttg.memdesc_index", "ttg.memdesc_reshape", "tt.trans", "tt.reshape",
    "tt.broadcast", "tt.expand_dims", "tt.bitcast",
}  # fmt: skip
# Consumers that are not conversions of the tile (shared-memory bookkeeping included).
NOT_CONVERTS = {
    "tt.dot", "tt.dot_scaled", "ttng.warp_group_dot", "tt.store", "scf.yield", "ttg.local_store",
    "ttg.local_dealloc", "ttg.async_wait", "ttg.async_commit_group",
    "ttg.async_copy_global_to_local", "amdgpu.buffer_load_to_local",
}  # fmt: skip
LOADS = {"tt.load", "amdgpu.buffer_load"}
# Pipelined loads (num_stages > 1) copy into a shared-memory buffer (their 2nd operand, a view
# of it); the tile is then read back from views of that buffer's allocation.
ASYNC_LOADS = {"ttg.async_copy_global_to_local", "amdgpu.buffer_load_to_local"}


def ttgir_stream_converts(ttgir: str, streams: dict[tuple[str, int], str]) -> dict[str, int]:
    """Per stream (`# stream:` markers), the most times one loaded tile is converted: the
    largest count of ops of one kind that take the load's value, or a view of it, as input."""
    locs = ttgir_locations(ttgir)
    ops: dict[str, str] = {}
    args: dict[str, list[str]] = {}
    users: dict[str, list[str]] = {}
    loads: dict[str, str] = {}  # loaded value (or shared buffer) -> stream
    for line in ttgir.splitlines():
        m = _OP.match(line)
        if not m:
            continue
        name, op, rest = m.groups()
        ops[name] = op
        # Operands: every %name outside string attributes (an inline asm's text).
        args[name] = re.findall(r"%[\w.-]+", re.sub(r'"(?:[^"\\]|\\.)*"', "", rest))
        for operand in args[name]:
            users.setdefault(operand, []).append(name)
        loc = _LOC.search(rest)
        src = resolve_loc(locs, loc.group(1)) if loc else None
        if src not in streams:
            continue
        if op in LOADS:
            loads[name] = streams[src]
        elif op in ASYNC_LOADS and len(args[name]) > 1:
            buf = args[name][1]
            while ops.get(buf) in VIEWS and args.get(buf):  # the view's allocation
                buf = args[buf][0]
            loads[buf] = streams[src]
    out: dict[str, int] = {}
    for name, stream in loads.items():
        seen, todo, kinds = {name}, [name], Counter()
        while todo:
            for user in users.get(todo.pop(), []):
                if ops[user] in VIEWS:
                    if user not in seen:
                        seen.add(user)
                        todo.append(user)
                elif ops[user] not in NOT_CONVERTS:
                    kinds[ops[user]] += 1
        out[stream] = max(out.get(stream, 0), max(kinds.values(), default=0))
    return out
