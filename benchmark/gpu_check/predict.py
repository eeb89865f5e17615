"""Predict, then measure: the cost model's time for each timed row of the GPU check, printed
before the run, and measured / predicted per row (and its median) after it.

The predictions are made on a CPU box (compile only) and committed beside this file as
predicted-<arch>.json, so the GPU spends no time compiling for them:

    python benchmark/gpu_check/predict.py --write            # sm90 (H200), then commit

Each file records a hash of the kernel sources, tables and model constants it was made from; a
run whose tree differs prints the predictions as stale (the code it measures is not the code
that was predicted). Pure Python at run time (json only).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PKG = REPO / "sgl-kernel-rocm" / "sgl_kernel_rocm"
# What the predictions depend on: kernels, their tables, the model and its constants.
INPUTS = (
    "moe/_kernels.py", "moe/_upcast.py", "moe/_split_k.py", "attention/mla_decode.py",
    "attention/_mla_decode_kernels.py", "attention/reduce.py", "attention/_reduce_kernels.py",
    "_mx_triton.py", "attention/split_kv.py", "attention/fp8_bits.py",
    "configs/moe_mxfp4/{arch}.json", "configs/decode_mla/{arch}.json",
    "configs/decode_dsa/{arch}.json", "compile_check/costmodel/model.py",
    "compile_check/costmodel/perf.json", "compile_check/costmodel/launches.py",
)  # fmt: skip
TIMED = ("moe", "moe_nosplit", "moe_bf16", "mla", "dsa")
# Timed rows the model does not cover.
UNMODELLED = ("indexer", "indexer_scores", "indexer_topk", "indexer_topk_radix")


def inputs_hash(arch: str) -> str:
    h = hashlib.sha256()
    for rel in INPUTS:
        path = PKG / rel.format(arch=arch)
        h.update(rel.encode())
        h.update(path.read_bytes() if path.exists() else b"-")
    return h.hexdigest()[:16]


def _file(arch: str) -> Path:
    return HERE / f"predicted-{arch}.json"


def load(arch: str) -> dict[str, Any] | None:
    path = _file(arch)
    return json.loads(path.read_text()) if path.exists() else None


def print_plan(kept, arch: str = "sm90") -> None:
    """Predicted us per timed case of the plan, before anything runs."""
    data = load(arch)
    if data is None:
        print(f"predicted ({arch}): none (python benchmark/gpu_check/predict.py --write)")
        return
    stale = data["inputs_hash"] != inputs_hash(arch)
    print(f"predicted ({arch}, cost model, {data['date']}, commit {data['commit']})"
          + (": STALE, kernels/tables/model changed since" if stale else ":"))  # fmt: skip
    for case in kept:
        p = data["rows"].get(case.name)
        if p:
            parts = ", ".join(f"{k} {v['us']:.1f}us ({v['bound']})" for k, v in p.items())
            print(f"  {case.name}: {parts}")
    unmodelled = sorted({c.kind for c in kept if c.kind in UNMODELLED})
    if unmodelled:
        print(f"  no cost-model prediction for {', '.join(unmodelled)} (the model covers "
              f"{', '.join(TIMED)})")  # fmt: skip


def _measured(row: dict[str, Any], what: str) -> float | None:
    if what == "moe.gate_up":
        return row.get("gate_up_us")
    if what == "moe.down":
        return row.get("down_us")
    return row.get("us")


def compare(rows: list[dict[str, Any]], arch: str) -> dict[str, Any]:
    """Adds predicted_us / measured_over_predicted to each timed row; prints and returns the
    median |measured / predicted - 1| (the issue's out-of-sample check: within 35%)."""
    data = load(arch)
    if data is None:
        print(f"measured / predicted: no predictions for {arch}")
        return {"arch": arch, "predictions": None}
    ratios = []
    for row in rows:
        pred = data["rows"].get(row.get("case", ""))
        if not pred or row.get("status") != "ok":
            continue
        row["predicted"] = {}
        for what, p in pred.items():
            meas = _measured(row, what)
            if meas and p["us"]:
                r = meas / p["us"]
                row["predicted"][what] = {"us": p["us"], "bound": p["bound"],
                                          "measured_over_predicted": round(r, 3)}  # fmt: skip
                ratios.append(r)
                print(f"  {row['case']} {what}: measured {meas:.1f}us / predicted "
                      f"{p['us']:.1f}us = {r:.2f} ({p['bound']})")  # fmt: skip
    stale = data["inputs_hash"] != inputs_hash(arch)
    out = {"arch": arch, "predictions_commit": data["commit"], "stale": stale, "n": len(ratios)}
    if ratios:
        med = statistics.median(abs(r - 1) for r in ratios)
        out |= {"median_abs_rel_err": round(med, 4), "median_ratio":
                round(statistics.median(ratios), 3), "within_35pct": med <= 0.35}  # fmt: skip
        print(f"measured / predicted: median |ratio - 1| {med:.1%} over {len(ratios)} rows "
              f"(bound 35%){' STALE predictions' if stale else ''}")  # fmt: skip
    return out


def write(arch: str, triton_dir: Path | None) -> Path:
    """Predict every timed case of the full plan for `arch` (compiles, CPU only) and save;
    `triton_dir`: compile with the Triton installed there (the GPU's version), not ours."""
    import subprocess

    import plan as P
    from sgl_kernel_rocm.compile_check.build import triton_version
    from sgl_kernel_rocm.compile_check.costmodel.predict import predict_rows

    cases = [c for c in P.build_plan() if c.kind in TIMED]
    rows = [{"kind": c.kind, **c.params, "case": c.name} for c in cases]
    preds = predict_rows(rows, arch, triton_dir=triton_dir)
    out: dict[str, dict] = {}
    for p in preds:
        what = p["what"].split(":")[0]
        out.setdefault(p["row"]["case"], {})[what] = {"us": p["us"], "bound": p["bound"],
                                                      "frac_copy": p["frac_copy"]}  # fmt: skip
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    data = {
        "what": "cost-model predictions per GPU-check row (compile_check/costmodel)",
        "arch": arch,
        "date": datetime.date.today().isoformat(),
        "commit": commit or "unknown",
        "triton": triton_version(triton_dir),
        "inputs_hash": inputs_hash(arch),
        "rows": out,
    }
    path = _file(arch)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="predict and write predicted-ARCH.json")
    p.add_argument("--arch", default="sm90")
    default = next((d for d in (REPO / ".triton" / "3.6.0", Path("/work/main/.triton/3.6.0"))
                    if d.exists()), None)  # fmt: skip
    p.add_argument(
        "--triton-dir",
        type=Path,
        default=default,
        help="compile with this Triton (default .triton/3.6.0: the H200's version)",
    )
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if args.write:
        print(f"wrote {write(args.arch, args.triton_dir)}")
    import plan as P

    print_plan([c for c in P.build_plan() if c.kind in TIMED], args.arch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
