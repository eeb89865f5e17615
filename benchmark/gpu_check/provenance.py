"""Which code a GPU figure measured: the commit a run stood on, and the source files behind each
kind of result row.

Every GPU result JSON under docs/results/ carries `commit`; test_gpu_figures_current.py diffs
the files of `KERNEL_SOURCES` between that commit and the checkout, so a figure quoted in docs/
goes stale (and must say so) when the kernel, its launcher or its shipped table changes.

Pure Python (no torch): the CPU tests import it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMIT_ENV = "GPU_CHECK_COMMIT"

_PKG = "sgl-kernel-rocm/sgl_kernel_rocm"
_MOE = [f"{_PKG}/moe/{f}.py" for f in ("__init__", "_kernels", "_align_kernel", "align",
                                         "triton_moe", "layout", "config", "_split_k")]  # fmt: skip
_MOE += [f"{_PKG}/_mx_triton.py", _PKG + "/configs/moe_mxfp4/{arch}.json"]
# Each attention op: its wrapper, its Triton body (_*_kernels.py) and the float64 references
# (reference.py, which the check_* rows compare against).
_ATTN = [f"{_PKG}/attention/{f}.py" for f in ("_common", "reduce", "_reduce_kernels", "split_kv",
                                             "fp8_bits", "reference")]  # fmt: skip
_MLA = [f"{_PKG}/attention/mla_decode.py", f"{_PKG}/attention/_mla_decode_kernels.py",
        f"{_PKG}/attention/latent_layout.py", *_ATTN,
        _PKG + "/configs/decode_mla/{arch}.json"]  # fmt: skip
_DSA = [f"{_PKG}/attention/dsa_decode.py", *_MLA, _PKG + "/configs/decode_dsa/{arch}.json"]
_INDEXER = [f"{_PKG}/attention/dsa_indexer.py", f"{_PKG}/attention/_dsa_indexer_kernels.py",
            f"{_PKG}/attention/_common.py", f"{_PKG}/attention/reference.py",
            _PKG + "/configs/decode_dsa_indexer/{arch}.json"]  # fmt: skip

# Row kind -> the files whose change makes its figures stale ({arch}: the run's arch id). The
# check_* kinds are correctness at the shipped tables, so the same files count.
KERNEL_SOURCES: dict[str, list[str]] = {
    "moe": _MOE,
    "moe_nosplit": _MOE,
    "check_moe": _MOE,
    "check_moe_ep": _MOE,
    "moe_bf16": [*_MOE, f"{_PKG}/moe/bf16.py"],
    "mla": _MLA,
    "check_mla": _MLA,
    "dsa": _DSA,
    "check_dsa": _DSA,
    "indexer": _INDEXER,
    "check_indexer": _INDEXER,
    "indexer_scores": _INDEXER,
    "indexer_topk": _INDEXER,
    "indexer_topk_radix": [
        *_INDEXER,
        f"{_PKG}/attention/topk_radix.py",
        f"{_PKG}/attention/_topk_radix_kernels.py",
    ],
}


def sources(kind: str, arch: str) -> list[str]:
    """Repository paths behind rows of `kind` measured on `arch`; KeyError names the kinds."""
    if kind not in KERNEL_SOURCES:
        raise KeyError(f"no kernel sources known for row kind {kind!r} "
                       f"(known: {', '.join(sorted(KERNEL_SOURCES))})")  # fmt: skip
    return [p.format(arch=arch) for p in KERNEL_SOURCES[kind]]


def current_commit(root: Path = ROOT) -> tuple[str | None, str]:
    """(commit, how it was found). The device gets a copy of the working tree, usually without
    .git, so GPU_CHECK_COMMIT (set by whoever starts the run) comes first; then git; else None."""
    env = os.environ.get(COMMIT_ENV, "").strip()
    if env:
        return env, f"${COMMIT_ENV}"
    git = ["git", "-C", str(root)]
    try:
        out = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "sgl-kernel-rocm"],
                               capture_output=True, text=True, timeout=10).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None, f"unknown: no .git here and ${COMMIT_ENV} unset"
    return out, "git (kernel sources modified)" if dirty.strip() else "git"


def stamp() -> dict[str, str | None]:
    """The `commit` and `commit_source` fields every GPU result JSON carries."""
    commit, how = current_commit()
    if commit is None:
        print(f"WARNING: the results carry no commit ({how}); docs cannot quote them")
    return {"commit": commit, "commit_source": how}
