"""Measured launch-config sweep of the fused MXFP4 MoE (W4A16) at GLM-5.2's decode shapes, for the
GPU present, in one time budget. Complements the static tables (chosen from compiler data on a
CPU box): the static ceiling models instruction issue, not latency, so it cannot see that a
decode tile of 4-bit weights needs more bytes in flight than the same tile of bf16 weights.

    python benchmark/gpu_check/sweep_moe.py --budget-s 200 --out OUT      # on the GPU
    python benchmark/gpu_check/sweep_moe.py --variants --budget-s 90 --out OUT
    python benchmark/gpu_check/sweep_moe.py --dry-run --out /tmp/x        # CPU, interpreter

--variants times the shipped table's config under each code path (`unpack`, `dot_scaled`) with
and without the load-time weight layout (`prepare_weights`, what the plugin passes when serving),
and the unpack path with the layout under each word-wise upcast the arch has (`moe/_upcast.py`:
inline PTX or the gfx950 convert vs pure Triton) and in the other tile orientation (`SWAP_AB`
toggled: the swap-AB A/B), instead of sweeping configs; `--points` limits the (layout,
tokens) points.

Writes OUT/moe-sweep-<arch>.json: every (layout, tokens, config) timed kernel-only (CUDA-graph
replay of one whole fused call), as a fraction of the copy bandwidth of the same run. Picking
table entries from it is a separate, CPU-side step (`scripts/apply_moe_sweep.py`), because a pick
must also pass the compile gate under every Triton we support.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import entry  # noqa: E402 - a sibling module, importable once HERE is on the path

# Priority order: the headline decode points first, extremes after.
POINTS = (("EP8", 1), ("TP8", 1), ("EP8", 16), ("TP8", 16), ("EP8", 4), ("TP8", 4),
          ("EP8", 64), ("TP8", 64))  # fmt: skip


def candidates(tokens: int) -> list[dict[str, int]]:
    """Decode tiles: more bytes in flight (wider K tiles, deeper pipelines) than the static pick,
    plus the static picks themselves as the baseline."""

    def cfg(bm, bn, bk, warps, stages):
        return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps,
                "num_stages": stages}  # fmt: skip

    out = [cfg(16, 64, 128, 4, 1), cfg(16, 64, 128, 4, 2), cfg(16, 128, 128, 4, 2)]
    grid = itertools.product((64, 128), (256, 512), (2, 3, 4))
    out += [cfg(16, bn, bk, 4, s) for bn, bk, s in grid]
    out += [cfg(16, 32, bk, 4, 3) for bk in (256, 512)]
    out += [cfg(16, 128, bk, 8, 3) for bk in (256, 512)]
    if tokens >= 64:
        out += [cfg(32, bn, bk, 4, 3) for bn, bk in itertools.product((64, 128), (256, 512))]
    return out


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variants", action="store_true", help="paths x layout, shipped configs")
    p.add_argument(
        "--points",
        type=int,
        default=len(POINTS),
        help="time only the first N (layout, tokens) points of the priority order",
    )


def main(argv: list[str] | None = None) -> int:
    args = entry.parse(__doc__, 200.0, argv, _flags)
    import measure
    import moe as moe_cases
    import plan as P
    import provenance
    import torch
    from sgl_kernel_rocm.arch import current_arch
    from sgl_kernel_rocm.moe import fused_moe_mxfp4
    from sgl_kernel_rocm.moe.config import (
        choose_path,
        choose_upcast,
        down_config,
        resolve_config,
        swap_ab_of,
    )
    from sgl_kernel_rocm.moe.layout import prepare_weights

    start = time.time()
    gpu = measure.on_gpu()
    arch = current_arch() if gpu else "cpu"
    copy = measure.copy_gbps()
    layouts = P.MOE_LAYOUTS if gpu else {k: P.DRY["moe_layouts"]["TP8"] for k in P.MOE_LAYOUTS}
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    last_s = 0.0  # the previous candidate's wall time: the next one is not started past budget
    for layout, tokens in POINTS[: args.points]:
        p = dict(layouts[layout], tokens=tokens if gpu else min(tokens, 2))
        case = moe_cases.moe_case(p)
        x_args = case["args"]
        if args.variants:
            prepared = prepare_weights(x_args[1])
            cands = [{"path": path, "layout": lay}
                     for path in ("unpack", "dot_scaled") for lay in (None, prepared)]  # fmt: skip
            # The word-wise upcasts of the unpack path, on the shipped tile.
            w = x_args[1]
            base, _ = resolve_config(arch, p["tokens"], w.num_experts, w.hidden, w.inter, "none")
            for up in dict.fromkeys((choose_upcast(arch), "triton")):
                cands.append({"path": "unpack", "layout": prepared,
                              "config": {**base, "upcast": up}})  # fmt: skip
            # The swap-AB A/B (moe/_kernels.py `_mac`): the shipped tiles of both GEMMs in the
            # other orientation (weights on the MMA's M side or not), same splits and stages.
            flip = {k: v for k, v in base.items() if k != "SWAP_AB"}
            if not swap_ab_of(base):
                flip["SWAP_AB"] = True
            if "down" in base:  # a down tile of its own is flipped as well
                flip["down"] = base["down"] | {"SWAP_AB": not swap_ab_of(down_config(base))}
            cands.append({"path": choose_path(arch, False), "layout": prepared, "config": flip})
        else:
            configs = candidates(tokens) if gpu else candidates(1)[:2]
            cands = [{"config": c, "layout": case["layout"]} for c in configs]
        ids0, w0 = case["route0"]
        ref = case["check"]()[1]
        for kw in cands:
            cfg = kw.get("config")
            kw = dict(kw, backend="triton")
            if time.time() - start + last_s > args.budget_s:
                skipped.append(f"{layout} M{tokens} {kw.get('path')} {cfg}")
                continue
            t_cand = time.time()
            row = {"layout": layout, "tokens": tokens, "config": cfg, **layouts[layout]}
            if args.variants:
                row.update(path=kw["path"], weight_layout=repr(kw["layout"]))

            def call(kw=kw, case=case, x_args=x_args):
                ids, w = next(case["routes"])
                return fused_moe_mxfp4(*x_args, w, ids, **kw)

            try:
                secs, how = measure.kernel_time_s(call, rep_ms=10)
            except Exception as exc:  # noqa: BLE001 - a config that does not build is a row
                row["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
                rows.append(row)
                if gpu:
                    torch.cuda.synchronize()
                continue
            out = fused_moe_mxfp4(*x_args, w0, ids0, **kw)
            row.update(moe_cases.check_moe(out, ref))
            nbytes = sum(case["bytes"].values())
            row.update(us=secs * 1e6, timing=how, gbps=nbytes / secs / 1e9)
            if copy["best_gbps"]:
                row["frac_copy"] = row["gbps"] / copy["best_gbps"]
            rows.append(row)
            last_s = time.time() - t_cand
            what = f"{kw.get('path')} {kw.get('layout')} {cfg or ''}" if args.variants else cfg
            print(f"{layout} M{tokens} {what} {row['us']:.1f}us "
                  f"{row.get('frac_copy', 0):.3f} ok={row['ok']}", flush=True)  # fmt: skip
    import triton

    result = {
        "what": "benchmark/gpu_check/sweep_moe.py: fused MXFP4 MoE W4A16 launch-config sweep",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "arch": arch,
        "device": torch.cuda.get_device_name(0) if gpu else platform.processor() or "cpu",
        "versions": {
            "torch": torch.__version__,
            "triton": triton.__version__,
            "python": platform.python_version(),
        },  # fmt: skip
        "kind": "moe",  # every row is a fused MXFP4 MoE call (provenance.KERNEL_SOURCES)
        **provenance.stamp(),
        "copy": copy,
        "budget_s": args.budget_s,
        "elapsed_s": time.time() - start,
        "rows": rows,
        "skipped_budget": skipped,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"moe-{'variants' if args.variants else 'sweep'}-{arch}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}: {len(rows)} rows, {len(skipped)} skipped for the budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
