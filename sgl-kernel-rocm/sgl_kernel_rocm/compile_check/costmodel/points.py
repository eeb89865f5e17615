"""Calibration points from the measured H200 rows in docs/results/: for each row, the kernels it
launched (compile cases at the configs and code paths that ran) with their launch grids, and
the measured time.

The rows ran at commit RUN_COMMIT under Triton 3.6.0, the GPU check and the sweep without the
load-time weight layout (benchmark/gpu_check/moe.py passed none then). Since then the MoE GEMM
kernels changed only in formatting, MLA/DSA decode and the split merge not at all (checked
here: the kernels' ASTs at RUN_COMMIT equal today's), so today's sources compile to the code
that ran. The MoE table did change: the configs the rows used are read from RUN_COMMIT's table
(git show). The DSA indexer and the alignment kernel changed since; their rows are not points
(the alignment's measured time is carried as a known addend of the whole-MoE rows, not
predicted).

Building needs git and a compile of every case (cached); the result is committed as
docs/results/cost-model/points-sm90.json, so a refit needs neither.
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

from sgl_kernel_rocm.compile_check import cases as C
from sgl_kernel_rocm.compile_check.costmodel.launches import mla_launches, moe_launches

RUN_COMMIT = "f2c17ae"
REPO = Path(__file__).resolve().parents[4]
RESULTS = REPO / "docs" / "results"
POINTS_FILE = RESULTS / "cost-model" / "points-sm90.json"
SOURCES = ("gpu-check-sm90.json", "moe-sweep-sm90.json", "moe-variants-sm90.json")
_PKG = "sgl-kernel-rocm/sgl_kernel_rocm"
# Kernel source at RUN_COMMIT -> where its definitions live today (MLA decode and the merge were
# split into wrapper, Triton body and reference.py after the run; the body comes first).
SAME_CODE = {
    "moe/_kernels.py": ("moe/_kernels.py",),
    "attention/mla_decode.py": (
        "attention/_mla_decode_kernels.py", "attention/mla_decode.py", "attention/reference.py",
    ),
    "attention/reduce.py": (
        "attention/_reduce_kernels.py", "attention/reduce.py", "attention/reference.py",
    ),
    "_mx_triton.py": ("_mx_triton.py",),
}  # fmt: skip
LAYOUTS = {"TP8": (256, 6144, 256), "EP8": (32, 6144, 2048)}


def _git_show(path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "show", f"{RUN_COMMIT}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _definitions(text: str) -> dict[str, str]:
    """Top-level functions, classes and assignments of a module by name, as ASTs (formatting,
    imports and the module docstring aside)."""
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = ast.dump(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            out[ast.unparse(target)] = ast.dump(node)
    return out


def kernels_unchanged() -> dict[str, bool]:
    """Per kernel source at RUN_COMMIT: is every definition it held unchanged today (wherever it
    moved: SAME_CODE), with nothing new in the file that holds the kernels now?"""
    out = {}
    for rel, now_rels in SAME_CODE.items():
        old = _definitions(_git_show(f"{_PKG}/{rel}"))
        now_files = [_definitions((C.PKG / r).read_text()) for r in now_rels]
        now = {k: v for defs in now_files for k, v in defs.items()}
        out[rel] = all(now.get(k) == v for k, v in old.items()) and set(now_files[0]) <= set(old)
    return out


def _moe_config(table: dict, experts: int, hidden: int, inter: int, tokens: int) -> dict:
    from sgl_kernel_rocm.moe.config import shape_key
    from sgl_kernel_rocm.tuning import pick_bucket

    key = shape_key(experts, hidden, inter, "none")
    cfg = pick_bucket(table[key] if key in table else table["DEFAULT_a16"], tokens)
    return {k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")}


def _moe_cases(
    cfg: dict, shape, path: str, fast: bool, w16: bool, arch: str, act: str = "none"
) -> list[C.Case]:
    experts, hidden, inter = shape
    pair = C.moe_pair(arch, cfg, experts, hidden, inter, act, path, "run", fast, w16)
    # The GPU check passes no shared-expert output (down's HAS_SHARED off).
    out = []
    for c in pair:
        ce = dict(c.constexprs)
        if "HAS_SHARED" in ce:
            ce["HAS_SHARED"] = False
        out.append(C.Case(**{**c.__dict__, "constexprs": tuple(ce.items())}))
    return out


def _kernel(case: C.Case, launch) -> dict[str, Any]:
    return {
        "key": case.key,
        "warps": case.num_warps,
        "stages": case.num_stages,
        "launch": launch.as_dict(),
    }


def row_kernels(
    r: dict[str, Any],
    moe_table: dict | None,
    arch: str = "sm90",
    cases: dict[str, C.Case] | None = None,
    prepared: bool = True,
) -> list[tuple[str, list[dict]]]:
    """The launches one GPU-check / sweep row makes: [(what, [kernel, ...]), ...] where `what`
    names the timed unit ("moe.gate_up", "moe.down", "moe", "attn.mla", ...). MoE configs come
    from `moe_table` (None: today's resolver); `cases` collects the compile cases. `prepared`:
    the MoE weights carry the load-time layout (today's GPU check and serving), unless the row
    names its layout."""
    from sgl_kernel_rocm.attention._common import gpu_decode_heuristic
    from sgl_kernel_rocm.attention.mla_decode import TILE_VARIANTS, mla_block_h
    from sgl_kernel_rocm.moe.config import heuristic_config, resolve_config
    from sgl_kernel_rocm.tuning import get_config

    cases = {} if cases is None else cases
    kind = r["kind"]
    if kind in ("moe", "moe_bf16", "moe_nosplit"):
        shape = (r["experts"], r["hidden"], r["inter"])
        if "config" in r and r["config"]:
            cfg = dict(r["config"])
        elif kind == "moe_bf16":
            cfg = heuristic_config(r["tokens"])
        elif moe_table is not None:
            cfg = _moe_config(moe_table, *shape, r["tokens"])
        else:
            cfg = resolve_config(arch, r["tokens"], *shape, r.get("act_quant", "none"))[0]
        # The launch config, the word upcast when the row names one, the split-K (dropped for
        # the no-split A/B rows), swap-AB and the down GEMM's own tile (moe.config).
        keep = (
            "BLOCK_M",
            "BLOCK_N",
            "BLOCK_K",
            "num_warps",
            "num_stages",
            "upcast",
            "SWAP_AB",
            "down",
        )
        keep += () if kind == "moe_nosplit" else ("SPLIT_K", "SPLIT_K_DOWN")
        cfg = {k: cfg[k] for k in keep if k in cfg}
        if kind == "moe_bf16":
            path, fast, w16 = "bf16", False, True
        else:
            path = r.get("path") or "unpack"
            # Rows name the load-time layout they ran with, else `prepared` says.
            fast = r.get("weight_layout", "prepared" if prepared else "None") != "None"
            w16 = False
        act = r.get("act_quant", "none")  # "mxfp4": W4A4
        gate, down = _moe_cases(cfg, shape, path, fast, w16, arch, act)
        cases.update({gate.key: gate, down.key: down})
        gl, dl = moe_launches(gate, down, *shape, r["tokens"])
        return [("moe.gate_up", [_kernel(gate, gl)]), ("moe.down", [_kernel(down, dl)])]
    if kind in ("mla", "dsa"):
        sparse = kind == "dsa"
        op = "decode_dsa" if sparse else "decode_mla"
        cfg, _ = get_config(op, arch, r["batch"], f"h{r['heads']}_d576_kvfp8", gpu_decode_heuristic)
        cfg = cfg | TILE_VARIANTS[r.get("variant", "table")]  # a row may time a tile variant
        bh = mla_block_h(cfg, r["heads"])
        case = C.mla_case(
            arch,
            op,
            sparse,
            cfg,
            r["heads"],
            bh,
            "fp8",
            *C.kv_type(arch, "fp8"),
            int(cfg["BLOCK_N"]),
        )
        split, merge, splits = mla_launches(
            case, cfg, r["batch"], r["heads"], r["ctx"], r["top_k"] if sparse else None
        )
        cases[case.key] = case
        ks = [_kernel(case, split)]
        if merge is not None:
            mc = [c for c in C.FAMILIES["reduce"](arch) if c.label == "dv512"][0]
            cases[mc.key] = mc
            ks.append(_kernel(mc, merge))
        return [(f"attn.{kind}:splits{splits}", ks)]
    return []


def build() -> tuple[list[dict], list[C.Case]]:
    """(points, cases to compile)."""
    table = json.loads(_git_show(f"{_PKG}/configs/moe_mxfp4/sm90.json"))
    check = json.loads((RESULTS / SOURCES[0]).read_text())
    align_us = {}
    for r in check["rows"]:
        if r["kind"] == "moe" and r.get("us"):
            align_us[(r["layout"], r["tokens"])] = r["kernels"]["moe_align_kernel"] * 1e6
    points: list[dict] = []
    cases: dict[str, C.Case] = {}
    for src in SOURCES:
        data = json.loads((RESULTS / src).read_text())
        for i, r in enumerate(data["rows"]):
            if "us" not in r or r.get("status", "ok") != "ok" or not r.get("ok", True):
                continue
            if src != SOURCES[0]:
                r = {"kind": "moe", **r}
            elif r["kind"] not in ("moe", "moe_bf16", "mla", "dsa"):
                continue
            # At RUN_COMMIT the GPU check and the sweep passed no load-time layout (full scale
            # range); the variants rows name theirs.
            units = row_kernels(r, table, "sm90", cases, prepared=False)
            if r["kind"].startswith("moe"):
                shape = f"moe:{r['layout']}:T{r['tokens']}"
                k0 = units[0][1][0]["key"].split("|")
                tag = "variant:" if "path" in r else ""
                variant = f"{tag}{k0[2].split('@')[0]}:{k0[3]}:{k0[4]}"
                if src == SOURCES[0]:  # per-kernel times measured (profiler): one point each
                    for what, ks in units:
                        us = r[what.split(".")[1] + "_us"]
                        points.append(
                            {
                                "source": src,
                                "row": i,
                                "kernel": what,
                                "shape": shape,
                                "variant": variant,
                                "measured_us": us,
                                "extra_us": 0.0,
                                "kernels": ks,
                            }
                        )
                else:  # whole MoE timed: the alignment's measured time is a known addend
                    points.append(
                        {
                            "source": src,
                            "row": i,
                            "kernel": "moe",
                            "shape": shape,
                            "variant": variant,
                            "measured_us": r["us"],
                            "extra_us": align_us[(r["layout"], r["tokens"])],
                            "kernels": [k for _, ks in units for k in ks],
                        }
                    )
            else:
                what, ks = units[0]
                kernel, variant = what.split(":")
                points.append(
                    {
                        "source": src,
                        "row": i,
                        "kernel": kernel,
                        "shape": f"{r['kind']}:{r['mode']}:b{r['batch']}:c{r['ctx']}",
                        "variant": variant,
                        "measured_us": r["us"],
                        "extra_us": 0.0,
                        "kernels": ks,
                    }
                )
    return points, list(cases.values())


def slim(rec: dict[str, Any]) -> dict[str, Any]:
    """What the model reads of a compile record."""
    isa = rec.get("isa") or {}
    loop = isa.get("main_loop")
    return {
        "ok": rec.get("ok"),
        "regs": rec.get("regs"),
        "shared_bytes": rec.get("shared_bytes"),
        "spills": rec.get("spills"),
        "isa": {
            "ops": isa.get("ops"),
            "main_loop": None
            if loop is None
            else {"ops": loop.get("ops"), "instructions": loop["instructions"]},
        },
    }
