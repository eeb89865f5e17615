"""Tune the fused MXFP4 MoE launch configs and write sgl_kernel_rocm/configs/moe_mxfp4/<arch>.json.

Three modes:
  (default, GPU)  time every candidate config per shape and token bucket on the GPU present and
                  write a "measured" table for its arch id.
  --static ARCH   write a "static" table for ARCH (gfx950, gfx942, sm90, sm100) chosen from compiler
                  data: candidates compiled with triton.compile for ARCH on this CPU box, the gate
                  applied, the least time the cost model predicts at each bucket's launch grid
                  kept (compile_check/static_tune.py, compile_check/costmodel).
  (no GPU)        --quick smoke run through the Triton interpreter on a toy shape; the timings
                  mean nothing, so the table goes to --out only, never into the package.

  python scripts/tune_moe.py --static gfx950
  python scripts/tune_moe.py --quick            # on a GPU: a few shapes and buckets
"""

from __future__ import annotations

import argparse
import datetime
import functools
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
from sgl_kernel_rocm.arch import KNOWN_ARCHS

# The GLM-5.2 layouts and token buckets of the tables, shared with the --static mode.
from sgl_kernel_rocm.compile_check.static_tune import GLM_LAYOUTS, TOP_K
from sgl_kernel_rocm.compile_check.static_tune import MOE_BUCKETS as BUCKETS

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "sgl-kernel-rocm" / "sgl_kernel_rocm" / "configs" / "moe_mxfp4"


def dump_table(table: dict) -> str:
    """JSON with one line per bucket, so a diff shows which configs a tuning run changed."""
    lines = ["{"]
    keys = list(table)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        if key == "_meta":
            lines.append(f'  "_meta": {json.dumps(table[key])}{comma}')
            continue
        lines.append(f"  {json.dumps(key)}: {{")
        buckets = list(table[key].items())
        for j, (bucket, cfg) in enumerate(buckets):
            inner = "," if j < len(buckets) - 1 else ""
            lines.append(f"    {json.dumps(bucket)}: {json.dumps(cfg)}{inner}")
        lines.append(f"  }}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _shape_key(experts: int, hidden: int, inter: int, act_quant: str) -> str:
    from sgl_kernel_rocm.moe.config import shape_key

    return shape_key(experts, hidden, inter, act_quant)


def _time(fn, device: str) -> float:
    """Median seconds of fn(); triton's do_bench on GPU, a plain timer in the interpreter."""
    if device != "cpu":
        import triton.testing

        return triton.testing.do_bench(fn, warmup=5, rep=30, return_mode="median") * 1e-3
    fn()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def candidates(quick: bool):
    grid = itertools.product((16, 32, 64, 128), (32, 64, 128, 256), (128, 256), (4, 8), (2, 3))
    for bm, bn, bk, warps, stages in grid:
        if quick and (warps, stages) != (4, 2):
            continue
        yield {
            "BLOCK_M": bm,
            "BLOCK_N": bn,
            "BLOCK_K": bk,
            "num_warps": warps,
            "num_stages": stages,
        }


def tune(args) -> None:
    from sgl_kernel_rocm.arch import current_arch
    from sgl_kernel_rocm.moe import fused_moe_mxfp4
    from sgl_kernel_rocm.moe.synthetic import random_moe_inputs

    on_gpu = torch.cuda.is_available()
    device = "cuda" if on_gpu else "cpu"
    arch = current_arch() if on_gpu else "cpu-interpreter"
    if on_gpu:
        layouts = {k: GLM_LAYOUTS[k] for k in (["TP8"] if args.quick else GLM_LAYOUTS)}
        buckets = (1, 16, 256) if args.quick else BUCKETS
        cands = list(candidates(args.quick))
    else:
        # Interpreter smoke run: the bundled toy model's shape, two buckets, two configs.
        layouts = {"toy": (16, 256, 128)}
        buckets = (1, 16)
        cands = [
            {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 1},
            {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 256, "num_warps": 4, "num_stages": 1},
        ]
    table: dict = {
        "_meta": {
            "source": "measured" if on_gpu else "interpreter-smoke (not a tuning result)",
            "how": f"scripts/tune_moe.py{' --quick' if args.quick else ''}: median of do_bench",
            "date": datetime.date.today().isoformat(),
            "hardware": torch.cuda.get_device_name(0) if on_gpu else platform.processor() or "cpu",
            "versions": _versions(),
        }
    }
    print(f"{'shape':<28} {'M':>6} {'best us':>10}  config")
    for experts, hidden, inter in layouts.values():
        for act_quant in ("none", "mxfp4"):
            key = _shape_key(experts, hidden, inter, act_quant)
            table[key] = {}
            for m in buckets:
                inputs = random_moe_inputs(m, experts, hidden, inter, TOP_K, device)
                best = None
                for cfg in cands:
                    try:
                        run = functools.partial(
                            fused_moe_mxfp4,
                            *inputs,
                            act_quant=act_quant,
                            backend="triton",
                            config=cfg,
                        )
                        t = _time(run, device)
                    except Exception as exc:  # a config that does not compile is skipped
                        print(f"  skip {cfg}: {type(exc).__name__}", file=sys.stderr)
                        continue
                    if best is None or t < best[0]:
                        best = (t, cfg)
                if best is None:
                    continue
                table[key][f"M_LEQ_{m}"] = best[1]
                print(f"{key:<28} {m:>6} {best[0] * 1e6:>10.1f}  {best[1]}")
            if table[key]:
                table[key]["any"] = table[key][f"M_LEQ_{buckets[-1]}"]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"tune_moe_{arch}.json"
    path.write_text(dump_table(table))
    print(f"wrote {path}")
    if on_gpu and args.install:
        target = CONFIG_DIR / f"{arch}.json"
        target.write_text(dump_table(table))
        print(f"installed {target}")


def decode_shaping(args) -> int:
    """Orientation (swap-AB), BLOCK_N, split-K and stages of the decode buckets, written into the
    shipped table; the report (before / after config and predicted us per bucket) to
    docs/results/."""
    from sgl_kernel_rocm.compile_check.build import triton_version
    from sgl_kernel_rocm.compile_check.decode_shaping import shape_decode

    also = _also(args)
    for arch in args.decode_shaping:
        t0 = time.time()
        path = CONFIG_DIR / f"{arch}.json"
        table = json.loads(path.read_text())
        keys = [_shape_key(*GLM_LAYOUTS[lay], "mxfp4" if act == "a4" else "none")
                for act in args.act or ["a16"] for lay in ("TP8", "EP8")]  # fmt: skip
        table, report = shape_decode(arch, table, keys, jobs=args.jobs, also=also)
        table["_meta"]["decode_shaping"] = (
            f"{datetime.date.today().isoformat()}: scripts/tune_moe.py --decode-shaping: "
            f"SWAP_AB / BLOCK_N / SPLIT_K / SPLIT_K_DOWN / num_stages of {', '.join(keys)} at "
            f"M_LEQ_1..64 chosen by the cost model on the bucket's BLOCK_M / BLOCK_K / warps "
            f"(compile_check/decode_shaping.py), gate passed under Triton "
            f"{', '.join([triton_version()] + [triton_version(d) for d in also])}; not measured"
        )
        path.write_text(dump_table(table))
        out = REPO / "docs" / "results" / f"moe-decode-shaping-{arch}.json"
        out.write_text(json.dumps({
            "what": "cost-model estimates (compile only, no GPU) before / after decode shaping",
            "date": datetime.date.today().isoformat(), "target_arch": arch, "commit": _commit(),
            "triton": [triton_version()] + [triton_version(d) for d in also],
            "hardware": "none: compiled on a 2-core x86_64 CPU box", "rows": report,
        }, indent=1) + "\n")  # fmt: skip
        print(f"wrote {path} and {out} ({time.time() - t0:.0f}s)")
    return 0


def _commit() -> str:
    import subprocess

    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    return out or "unknown"


def _also(args) -> list[Path]:
    if args.also_triton is not None:
        return args.also_triton
    default = REPO / ".triton" / "3.6.0"
    return [default] if default.exists() else []


def _progress(n, total, case, rec) -> None:
    if n % 25 == 0 or n == total:
        print(f"  compiled {n}/{total} ({case.arch})", file=sys.stderr, flush=True)


def _versions() -> dict:
    import triton

    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "hip": torch.version.hip,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--static",
        choices=KNOWN_ARCHS,
        action="append",
        help="write a static table for ARCH (repeatable)",
    )
    parser.add_argument("--jobs", type=int, default=None, help="compile processes for --static")
    parser.add_argument(
        "--also-triton",
        action="append",
        type=Path,
        default=None,
        help="--static picks must also pass the gate under the Triton installed in this dir "
        "(default: .triton/3.6.0 if present; `make compile-check TRITON=3.6.0` installs it)",
    )
    parser.add_argument(
        "--decode-shaping",
        choices=KNOWN_ARCHS,
        action="append",
        help="keep ARCH's table, choose swap-AB, BLOCK_N, split-K and stages of its GLM-5.2 "
        "TP8/EP8 decode buckets from compiler data (compile_check/decode_shaping.py; "
        "repeatable)",
    )
    parser.add_argument("--act", action="append", choices=("a16", "a4"),
                        help="--decode-shaping: activation formats (default a16)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="few shapes/buckets/candidates")
    parser.add_argument("--out", default=str(REPO / "benchmark" / "results"))
    parser.add_argument(
        "--install",
        action="store_true",
        help="on a GPU, also write the measured table into the package configs",
    )
    args = parser.parse_args(argv)
    if args.decode_shaping:
        return decode_shaping(args)
    if args.static:
        from sgl_kernel_rocm.compile_check.static_tune import moe_table

        for arch in args.static:
            t0 = time.time()
            table = moe_table(arch, jobs=args.jobs, progress=_progress, also=_also(args))
            path = CONFIG_DIR / f"{arch}.json"
            path.write_text(dump_table(table))
            print(f"wrote {path} ({time.time() - t0:.0f}s)")
        return 0
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the kernel imports
        if not args.quick:
            print(
                "no GPU: only --quick (an interpreter smoke run) or --static ARCH", file=sys.stderr
            )
            return 2
    tune(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
