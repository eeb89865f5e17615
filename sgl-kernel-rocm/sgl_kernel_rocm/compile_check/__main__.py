"""CLI of the compile gate; exit status 1 when any compiled kernel violates the gate."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sgl_kernel_rocm.compile_check import results_view
from sgl_kernel_rocm.compile_check.archs import ARCHS
from sgl_kernel_rocm.compile_check.build import default_cache_dir, run_matrix, triton_version
from sgl_kernel_rocm.compile_check.cases import FAMILIES, all_cases
from sgl_kernel_rocm.compile_check.doc import write_doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sgl_kernel_rocm.compile_check",
                                description=__doc__)  # fmt: skip
    p.add_argument("--arch", action="append", choices=sorted(ARCHS), help="repeatable; all")
    p.add_argument("--family", action="append", choices=sorted(FAMILIES), help="repeatable; all")
    p.add_argument("--jobs", type=int, default=None, help="compile processes (default: cores)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help=f"result cache (default {default_cache_dir()})")  # fmt: skip
    p.add_argument("--json", type=Path, help="write the results as JSON here")
    p.add_argument(
        "--doc",
        type=Path,
        help="record this Triton version's results beside DOC (DOC's folder/compile/"
        "triton-<version>.json) and regenerate DOC from every recorded version",
    )
    p.add_argument("--quiet", action="store_true", help="no table, only the verdict")
    p.add_argument(
        "--predict",
        action="store_true",
        help="cost model: predicted us per kernel, config, arch and GLM-5.2 shape, the fraction "
        "of copy bandwidth and the binding term (families moe, mla; default both)",
    )
    args = p.parse_args(argv)
    if args.predict:
        return _predict(args)

    cases = all_cases(args.arch, args.family)
    t0 = time.time()

    def progress(n, total, case, rec):
        if not args.quiet:
            status = "ok" if rec["ok"] else "FAIL"
            print(f"[{n}/{total}] {rec['seconds']:6.1f}s {status} {case.key}", file=sys.stderr)

    results = run_matrix(cases, jobs=args.jobs, cache_dir=args.cache_dir, progress=progress)
    table = results_view.rows(cases, results)
    st = results_view.stamp(triton_version())
    if not args.quiet:
        print(results_view.console_table(table))
    payload = {"stamp": st, "rows": table}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=1, default=str))
    if args.doc:
        write_doc(args.doc, payload)
    bad = [v for r in table for v in r["violations"]]
    cached = sum(1 for r in results if r.get("cached"))
    print(f"triton {st['triton']}: {len(table)} kernels ({cached} cached) in "
          f"{time.time() - t0:.0f}s; gate violations: {len(bad)}")  # fmt: skip
    for v in bad:
        print("  " + v)
    return 1 if bad else 0


def _predict(args) -> int:
    from sgl_kernel_rocm.compile_check.costmodel import predict as P

    kinds = set()
    for fam in args.family or ["moe", "mla"]:
        kinds |= {"moe"} if fam == "moe" else {"mla", "dsa"} if fam == "mla" else set()
    if not kinds:
        print("--predict covers the families moe and mla", file=sys.stderr)
        return 2
    out = {}
    for arch in args.arch or ["sm90", "gfx950"]:
        preds = P.predict_rows(P.glm_rows(tuple(kinds)), arch, jobs=args.jobs)
        print(f"# {arch}: {P.label(arch)}")
        print(P.table(preds, arch))
        out[arch] = preds
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
