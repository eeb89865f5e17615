"""Predicted time per kernel, config, arch and shape (`python -m sgl_kernel_rocm.compile_check
--predict`), and the per-row predictions the GPU check prints before it runs.

Shapes are GLM-5.2's decode points (the GPU check's): MoE TP8 / EP8 at 1-256 tokens, MLA and
DSA at 8 heads (TP8) and 64 (DP attention), batch 1-128, context 4k-20k. Each prediction names
the term that binds. On sm90 the model is calibrated on the H200 (docs/results/
cost-model-calibration.json); elsewhere it is "model calibrated on sm90; <arch> constants from
costmodel/perf.json" and says so.
"""

from __future__ import annotations

import itertools
from typing import Any

from sgl_kernel_rocm.compile_check.costmodel import model
from sgl_kernel_rocm.compile_check.costmodel.points import row_kernels

MOE_LAYOUTS = {"TP8": (256, 6144, 256), "EP8": (32, 6144, 2048)}
MOE_TOKENS = (1, 4, 16, 64, 256)
ATTN = {"TP8": 8, "DP": 64}
BATCHES = (1, 8, 32, 128)
CONTEXTS = (4096, 8192, 20480)


def label(arch: str) -> str:
    if arch == "sm90":
        return "model calibrated on the H200 (sm90)"
    return f"model calibrated on sm90; {arch} constants from costmodel/perf.json sources"


def glm_rows(kinds=("moe", "mla", "dsa")) -> list[dict[str, Any]]:
    """The GPU check's timed rows (benchmark/gpu_check/plan.py shapes) as row dicts."""
    rows = []
    if "moe" in kinds:
        for (lay, (e, h, i)), t in itertools.product(MOE_LAYOUTS.items(), MOE_TOKENS):
            rows.append({"kind": "moe", "layout": lay, "experts": e, "hidden": h, "inter": i,
                         "tokens": t})  # fmt: skip
    for kind in ("mla", "dsa"):
        if kind not in kinds:
            continue
        for (mode, heads), ctx, b in itertools.product(ATTN.items(), CONTEXTS, BATCHES):
            rows.append({"kind": kind, "mode": mode, "heads": heads, "batch": b, "ctx": ctx,
                         "top_k": 2048})  # fmt: skip
    return rows


def predict_rows(
    rows: list[dict[str, Any]], arch: str, jobs: int | None = None, triton_dir=None
) -> list[dict[str, Any]]:
    """One entry per timed unit of each row: {row, what, us, bound, frac_copy, kernels}."""
    from sgl_kernel_rocm.compile_check.build import run_matrix

    cases: dict = {}
    units = [(r, row_kernels(r, None, arch, cases)) for r in rows]
    keys = list(cases)
    recs = dict(zip(keys, run_matrix([cases[k] for k in keys], jobs=jobs, triton_dir=triton_dir),
                    strict=True))  # fmt: skip
    out = []
    for r, us_units in units:
        for what, ks in us_units:
            total, bounds, nbytes, parts = 0.0, [], 0.0, []
            for k in ks:
                rec = recs[k["key"]]
                if not rec.get("ok"):
                    total = float("nan")
                    bounds.append("does not compile")
                    continue
                launch = model.Launch(**k["launch"])
                p = model.predict(rec, k["warps"], k["stages"], arch, launch)
                total += p.us
                bounds.append(p.bound)
                nbytes += launch.hbm_bytes
                parts.append({"key": k["key"], "us": round(p.us, 2), "bound": p.bound,
                              "terms_us": p.terms_us})  # fmt: skip
            copy = model.constants(arch)["copy_tb_s"] * 1e6
            out.append({
                "row": r,
                "what": what,
                "config": ks[0]["key"].split("|")[3] + " " + ks[0]["key"].split("|")[4],
                "us": round(total, 2),
                "bound": "+".join(bounds),
                "frac_copy": round(nbytes / (total * copy), 3) if total == total else None,
                "kernels": parts,
            })  # fmt: skip
    return out


def shape_of(r: dict[str, Any]) -> str:
    if r["kind"].startswith("moe"):
        return f"{r['layout']} E{r['experts']} H{r['hidden']} I{r['inter']} T{r['tokens']}"
    return f"{r['mode']} h{r['heads']} b{r['batch']} ctx{r['ctx']}"


def table(preds: list[dict[str, Any]], arch: str) -> str:
    head = ["kernel", "config", "arch", "shape", "predicted us", "frac of copy bw", "binds"]
    body = [head] + [
        [p["what"], p["config"], arch, shape_of(p["row"]), f"{p['us']:.1f}",
         f"{p['frac_copy']:.2f}" if p["frac_copy"] is not None else "-", p["bound"]]
        for p in preds
    ]  # fmt: skip
    widths = [max(len(r[i]) for r in body) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in body)  # fmt: skip
