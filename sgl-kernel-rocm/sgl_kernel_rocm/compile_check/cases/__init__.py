"""The compile matrix: every @triton.jit kernel of the package x arch x the configs its shipped
JSON tables (or heuristics) can select there x each code path, deduplicated. One module per
kernel family; they share the Case and its builder (base.py).

A Case carries what `triton.compile` needs (signature, constexprs, which integer arguments the
JIT would specialize as divisible by 16 or equal to 1 at a realistic GLM shape) plus what the
gate and the cost model need (the stream the main loop reads and its bytes per iteration).
"""

from __future__ import annotations

from sgl_kernel_rocm.compile_check.archs import ARCHS
from sgl_kernel_rocm.compile_check.cases.align import align_cases
from sgl_kernel_rocm.compile_check.cases.base import PKG, Case, build, dedupe, kv_type
from sgl_kernel_rocm.compile_check.cases.gqa import gqa_cases
from sgl_kernel_rocm.compile_check.cases.indexer import indexer_cases
from sgl_kernel_rocm.compile_check.cases.mla import MLA_HEADS, mla_case, mla_cases
from sgl_kernel_rocm.compile_check.cases.moe import moe_cases, moe_pair
from sgl_kernel_rocm.compile_check.cases.mx import quantize_cases
from sgl_kernel_rocm.compile_check.cases.reduce import reduce_cases

FAMILIES = {
    "moe": moe_cases,
    "align": align_cases,
    "mx": quantize_cases,
    "gqa": gqa_cases,
    "mla": mla_cases,
    "indexer": indexer_cases,
    "reduce": reduce_cases,
}

__all__ = ["FAMILIES", "MLA_HEADS", "PKG", "Case", "all_cases", "build", "dedupe", "kv_type",
           "mla_case", "moe_pair"]  # fmt: skip


def all_cases(archs=None, families=None) -> list[Case]:
    """The deduplicated matrix, in a stable order."""
    out = []
    for arch in archs or list(ARCHS):
        for name, make in FAMILIES.items():
            if not families or name in families:
                out += make(arch)
    return dedupe(out)
