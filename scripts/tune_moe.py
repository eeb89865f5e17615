"""Tune the fused MXFP4 MoE launch configs and write sgl_kernel_rocm/configs/moe_mxfp4/<arch>.json.

Three modes:
  (default, GPU)  time every candidate config per shape and token bucket on the GPU present and
                  write a "measured" table for its arch id.
  --derive ARCH   write a "derived" table for ARCH (gfx950, gfx942, sm90, sm100) from public chip
                  facts (CU/SM count, LDS/shared memory, matrix-instruction shapes); no GPU needed.
  (no GPU)        --quick smoke run through the Triton interpreter on a toy shape; the timings
                  mean nothing, so the table goes to --out only, never into the package.

  python scripts/tune_moe.py --derive gfx950
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

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "sgl-kernel-rocm" / "sgl_kernel_rocm" / "configs" / "moe_mxfp4"

# Public chip facts the derived tables rest on (vendor whitepapers / ISA guides).
CHIPS = {
    "gfx950": {
        "units": 256,
        "lds_kib": 160,
        "mma_m": 16,
        "native_mx": True,
        "note": "CDNA4: 256 CUs, 160 KiB LDS/CU, MFMA scale 16x16x128 / 32x32x64 f8f6f4",
    },
    "gfx942": {
        "units": 304,
        "lds_kib": 64,
        "mma_m": 16,
        "native_mx": False,
        "note": "CDNA3: 304 CUs, 64 KiB LDS/CU, bf16 MFMA 16x16x16 / 32x32x8, no MX MFMA",
    },
    "sm90": {
        "units": 132,
        "lds_kib": 228,
        "mma_m": 64,
        "native_mx": False,
        "note": "Hopper: 132 SMs, 228 KiB smem/SM, wgmma m64nNk16, dot_scaled emulated",
    },
    "sm100": {
        "units": 148,
        "lds_kib": 228,
        "mma_m": 128,
        "native_mx": True,
        "note": "Blackwell: 148 SMs, 228 KiB smem/SM, tcgen05 block-scaled MMA (M 128)",
    },
}
# GLM-5.2 MoE (hidden 6144, moe_intermediate 2048, 256 experts, top-8) per parallel layout.
GLM_LAYOUTS = {
    "TP1": (256, 6144, 2048),
    "TP8": (256, 6144, 256),
    "EP8": (32, 6144, 2048),
}
TOP_K = 8
BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def derive_config(arch: str, m: int, experts: int, hidden: int, inter: int) -> dict:
    """One config from chip facts: enough programs to fill the chip, tiles that fit the LDS."""
    chip = CHIPS[arch]
    slots_per_expert = max(1, m * TOP_K // experts)
    # M tile: the expected tokens per expert, at least the matrix unit's M (16 on MFMA; dot >= 16).
    block_m = min(max(16, _pow2_at_least(slots_per_expert)), 128)
    block_k = 256 if chip["native_mx"] and m > 256 else 128
    active = min(m * TOP_K, experts)
    # N tile: the largest that still gives every CU/SM at least ~2 programs on gate_up.
    block_n = 32
    m_blocks = max(active, -(-m * TOP_K // block_m))
    for bn in (256, 128, 64, 32):
        programs = m_blocks * (inter // bn)
        if programs >= 2 * chip["units"]:
            block_n = bn
            break
    # Stages: as many tile copies as fit in the LDS/smem of one CU/SM; shrink the
    # K tile, then the M tile (to 64), then the N tile, until double buffering fits.
    while True:
        tile_bytes = block_m * block_k * 2 + block_n * block_k + block_n * block_k // 16
        stages = min(4, chip["lds_kib"] * 1024 // tile_bytes)
        if stages >= 2 or (block_k == 128 and block_n == 32):
            break
        if block_k > 128:
            block_k //= 2
        elif block_m > 64:
            block_m //= 2
        else:
            block_n //= 2
    stages = max(1, stages)
    warps = 4 if block_m * block_n <= 64 * 64 else 8
    return {
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "BLOCK_K": block_k,
        "num_warps": warps,
        "num_stages": stages,
    }


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


def derive_table(arch: str) -> dict:
    chip = CHIPS[arch]
    table: dict = {
        "_meta": {
            "source": "derived",
            "how": "scripts/tune_moe.py --derive: not measured; derived from public chip facts "
            f"({chip['note']}): M tile from tokens per expert, N tile so gate_up gives >= 2 "
            "programs per CU/SM, pipeline stages from the LDS/shared memory per CU/SM",
            "date": datetime.date.today().isoformat(),
            "hardware": "none (no GPU was used)",
        }
    }
    for experts, hidden, inter in GLM_LAYOUTS.values():
        for act_quant in ("none", "mxfp4"):
            key = _shape_key(experts, hidden, inter, act_quant)
            table[key] = {
                f"M_LEQ_{m}": derive_config(arch, m, experts, hidden, inter) for m in BUCKETS
            }
            table[key]["any"] = derive_config(arch, 16384, experts, hidden, inter)
    table["DEFAULT"] = {f"M_LEQ_{m}": derive_config(arch, m, 256, 6144, 2048) for m in (16, 256)}
    table["DEFAULT"]["any"] = derive_config(arch, 16384, 256, 6144, 2048)
    return table


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
    parser.add_argument("--derive", choices=sorted(CHIPS), help="write a derived table for ARCH")
    parser.add_argument("--quick", action="store_true", help="few shapes/buckets/candidates")
    parser.add_argument("--out", default=str(REPO / "benchmark" / "results"))
    parser.add_argument(
        "--install",
        action="store_true",
        help="on a GPU, also write the measured table into the package configs",
    )
    args = parser.parse_args(argv)
    if args.derive:
        path = CONFIG_DIR / f"{args.derive}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_table(derive_table(args.derive)))
        print(f"wrote {path}")
        return 0
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the kernel imports
        if not args.quick:
            print(
                "no GPU: only --quick (an interpreter smoke run) or --derive ARCH", file=sys.stderr
            )
            return 2
    tune(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
