"""Cost-model estimates of the fused MXFP4 MoE at GLM-5.2's decode points, per arch and code
path: what docs/kernels-moe.md quotes as "what binds now" (compile only, CPU; no GPU figure).

    python scripts/predict_moe_decode.py [--arch sm90 --arch gfx950] [--triton-dir DIR]

For each arch: TP8 (E256, I256) and EP8 (E32, I2048) at hidden 6144 and 1-64 tokens, with the
shipped tables and the load-time layout, on the path production takes and its alternatives
(sm90: unpack with the PTX or the pure-Triton word upcast, dot_scaled; gfx950: dot_scaled,
unpack with the hardware-convert upcast; W4A4 where the arch runs it natively). Writes
docs/results/moe-predicted-decode.json and prints a markdown table with each row's predicted
time, fraction of the arch's copy bandwidth and of its datasheet bandwidth, and binding term.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENS = (1, 4, 16, 64)
LAYOUTS = {"TP8": (256, 6144, 256), "EP8": (32, 6144, 2048)}
DATASHEET_TB_S = {"sm90": 4.8, "sm100": 8.0, "gfx950": 8.0, "gfx942": 5.3}
# (label, path, act_quant, upcast or None for the arch's choice)
VARIANTS = {
    "sm90": [("W4A16 unpack+ptx (production)", "unpack", "none", None),
             ("W4A16 unpack+triton", "unpack", "none", "triton"),
             ("W4A16 dot_scaled", "dot_scaled", "none", None)],
    "gfx950": [("W4A16 dot_scaled (production)", "dot_scaled", "none", None),
               ("W4A16 unpack+gfx950 convert", "unpack", "none", None),
               ("W4A4 dot_scaled (production)", "dot_scaled", "mxfp4", None)],
}  # fmt: skip


def rows_for(arch: str) -> list[dict]:
    from sgl_kernel_rocm.moe.config import resolve_config

    rows = []
    for label, path, act, upcast in VARIANTS[arch]:
        for (lay, (e, h, i)), t in ((kv, t) for kv in LAYOUTS.items() for t in TOKENS):
            cfg = dict(resolve_config(arch, t, e, h, i, act)[0])
            if upcast:
                cfg["upcast"] = upcast
            rows.append({"kind": "moe", "layout": lay, "experts": e, "hidden": h, "inter": i,
                         "tokens": t, "path": path, "act_quant": act, "config": cfg,
                         "weight_layout": "prepared", "variant": label})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", action="append", choices=sorted(VARIANTS))
    p.add_argument("--triton-dir", type=Path, default=None, help="compile with this Triton")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "results" / "moe-predicted-decode.json"
    )
    args = p.parse_args(argv)
    from sgl_kernel_rocm.compile_check.build import triton_version
    from sgl_kernel_rocm.compile_check.costmodel import model
    from sgl_kernel_rocm.compile_check.costmodel.predict import label, predict_rows

    result = {
        "what": "cost-model estimates (compile only, no GPU) of the fused MXFP4 MoE at GLM-5.2 "
                "decode points; frac_copy is of the model's copy bandwidth for the arch, "
                "frac_datasheet of the datasheet figure",
        "date": datetime.date.today().isoformat(),
        "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip() or "unknown",
        "triton": triton_version(args.triton_dir),
        "hardware": "none: compiled on a 2-core x86_64 CPU box",
        "archs": {},
    }  # fmt: skip
    for arch in args.arch or sorted(VARIANTS):
        preds = predict_rows(rows_for(arch), arch, jobs=args.jobs, triton_dir=args.triton_dir)
        copy = model.constants(arch)["copy_tb_s"]
        merged: dict[tuple, dict] = {}
        for pr in preds:
            r = pr["row"]
            k = (r["variant"], r["layout"], r["tokens"])
            m = merged.setdefault(k, {"variant": r["variant"], "layout": r["layout"],
                                      "tokens": r["tokens"], "config": r["config"], "us": 0.0,
                                      "bytes": 0.0, "bound": []})  # fmt: skip
            m["us"] += pr["us"]
            # frac_copy = bytes / (us x copy): the bytes the unit moves (copy TB/s = bytes/us/1e6)
            m["bytes"] += (pr["frac_copy"] or 0.0) * pr["us"] * copy * 1e6
            m["bound"].append(f"{pr['what'].split('.')[-1]}: {pr['bound']}")
        out = []
        for m in merged.values():
            us = m["us"]
            out.append({**m, "us": round(us, 2),
                        "frac_copy": round(m["bytes"] / (us * copy * 1e6), 3),
                        "frac_datasheet": round(m["bytes"] / (us * DATASHEET_TB_S[arch] * 1e6), 3),
                        "bytes": int(m["bytes"])})  # fmt: skip
        result["archs"][arch] = {"model": label(arch), "copy_tb_s": copy,
                                 "datasheet_tb_s": DATASHEET_TB_S[arch], "rows": out}  # fmt: skip
        print(f"\n{arch} ({label(arch)}; copy {copy} TB/s, datasheet {DATASHEET_TB_S[arch]} TB/s)")
        print("| variant | layout | tokens | predicted us | of copy | of datasheet | binds |")
        print("|---|---|---|---|---|---|---|")
        for o in out:
            print(
                f"| {o['variant']} | {o['layout']} | {o['tokens']} | {o['us']:.1f} | "
                f"{o['frac_copy']:.0%} | {o['frac_datasheet']:.0%} | {'; '.join(o['bound'])} |"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
