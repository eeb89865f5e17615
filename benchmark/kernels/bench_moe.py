"""Fused MXFP4 MoE microbenchmark: GLM-5.2 expert shapes per TP/EP layout, decode and prefill.

Reports time, achieved GB/s and TFLOP/s, their fractions of the device's measured copy bandwidth
and matrix rate, and time ratios against (a) torch dequantize-then-bf16-matmul and (b) SGLang's
own Triton fused MoE on bf16 weights where it imports. Writes JSON + a PNG roofline under --out.

    python benchmark/kernels/bench_moe.py --quick     # CPU: toy shape, torch path + interpreter
    python benchmark/kernels/bench_moe.py             # GPU: GLM-5.2 layouts, 1-256 and 1k-16k
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

if not torch.cuda.is_available():
    # Kernels only run on CPU through the interpreter; must be set before they import.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
from sgl_kernel_rocm.arch import current_arch  # noqa: E402
from sgl_kernel_rocm.moe import fused_moe_mxfp4, prepare_reference_weights  # noqa: E402
from sgl_kernel_rocm.moe.config import resolve_config  # noqa: E402
from sgl_kernel_rocm.moe.synthetic import random_moe_inputs  # noqa: E402
from sgl_kernel_rocm.mx import dequantize_mxfp4  # noqa: E402
from timing import copy_bandwidth, matrix_rate, time_fn  # noqa: E402

TOP_K = 8
# GLM-5.2 MoE: hidden 6144, moe_intermediate 2048, 256 experts, top-8; per-GPU slice by layout.
LAYOUTS = {
    "TP8": {"experts": 256, "hidden": 6144, "inter": 256},
    "EP8": {"experts": 32, "hidden": 6144, "inter": 2048},
    "TP1": {"experts": 256, "hidden": 6144, "inter": 2048},
}
# The bundled toy model (hidden 256, 16 experts top-4, moe_intermediate 128) for CPU runs.
TOY = {"toy": {"experts": 16, "hidden": 256, "inter": 128}}
DECODE = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREFILL = (1024, 4096, 16384)


def moe_traffic(tokens, experts, hidden, inter, top_k, topk_ids, act_bytes=2) -> tuple[int, int]:
    """(bytes, flops) of one MoE call: MXFP4 weights of the experts hit, activations, buffers."""
    active = int(torch.unique(topk_ids[topk_ids >= 0]).numel())
    per_expert = (2 * inter * hidden + hidden * inter) * (0.5 + 1 / 32)
    slots = tokens * top_k
    act = tokens * hidden * act_bytes * 2  # x in, out
    inter_buf = slots * inter * act_bytes * 2  # SwiGLU output written then read
    slot_buf = slots * hidden * act_bytes * 2  # per-slot down output written then summed
    flops = 2 * slots * (2 * inter * hidden + hidden * inter)
    return int(active * per_expert + act + inter_buf + slot_buf), flops


def torch_dequant_baseline(x, weights, tw, ti):
    """(a) torch: dequantize the hit experts to bf16, then a bf16 matmul pair per expert."""
    w13, s13, w2, s2 = weights.w13, weights.w13_scale, weights.w2, weights.w2_scale
    inter = weights.inter
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    flat = ti.reshape(-1).long()
    weights = tw.reshape(-1)
    for e in torch.unique(flat[flat >= 0]).tolist():
        slots = (flat == e).nonzero().squeeze(1)
        tok = slots // ti.shape[1]
        g_u = x[tok] @ dequantize_mxfp4(w13[e], s13[e], dtype=x.dtype).T
        act = torch.nn.functional.silu(g_u[:, :inter]) * g_u[:, inter:]
        y = act @ dequantize_mxfp4(w2[e], s2[e], dtype=x.dtype).T
        out.index_add_(0, tok, y.float() * weights[slots, None])
    return out.to(x.dtype)


def sglang_bf16_moe(x, weights, tw, ti) -> tuple[Callable[[], Any] | None, str]:
    """(b) SGLang's Triton fused MoE on bf16 copies of the weights, if it imports and runs."""
    if x.device.type != "cuda":
        return None, "needs a GPU"
    try:
        from sglang.srt.layers.moe.moe_runner.base import MoeRunnerConfig
        from sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe import fused_experts
        from sglang.srt.layers.moe.topk import StandardTopKOutput

        w1b = dequantize_mxfp4(weights.w13, weights.w13_scale, dtype=torch.bfloat16)
        w2b = dequantize_mxfp4(weights.w2, weights.w2_scale, dtype=torch.bfloat16)
        topk = StandardTopKOutput(tw, ti, torch.empty(0, device=x.device))
        cfg = MoeRunnerConfig(inplace=False)

        def run():
            return fused_experts(x, w1b, w2b, topk, cfg)

        run()
        return run, "ok"
    except Exception as exc:  # any import/runtime failure is reported, not fatal
        return None, f"{type(exc).__name__}: {str(exc)[:120]}"


def bench_case(name, shape, tokens, top_k, device, iters, with_triton) -> list[dict]:
    experts, hidden, inter = shape["experts"], shape["hidden"], shape["inter"]
    inputs = random_moe_inputs(tokens, experts, hidden, inter, top_k, device)
    nbytes, flops = moe_traffic(tokens, experts, hidden, inter, top_k, inputs[3])
    arch = current_arch() if device == "cuda" else "cpu"
    rows = []
    base_a = time_fn(lambda: torch_dequant_baseline(*inputs), device, iters)
    sgl_fn, sgl_note = sglang_bf16_moe(*inputs) if with_triton else (None, "skipped")
    base_b = time_fn(sgl_fn, device, iters) if sgl_fn else None
    variants = []
    if with_triton:
        variants += [("triton", "none"), ("triton", "mxfp4")]
    if device == "cpu":
        variants += [("torch", "none"), ("torch-prepared", "none"), ("torch", "mxfp4")]
    prepared = prepare_reference_weights(inputs[1]) if device == "cpu" else None
    for backend, act_quant in variants:
        kwargs = {"act_quant": act_quant, "backend": backend.split("-")[0]}
        if backend == "torch-prepared":
            kwargs["prepared"] = prepared
        sec = time_fn(lambda kwargs=kwargs: fused_moe_mxfp4(*inputs, **kwargs), device, iters)
        cfg, tuned = resolve_config(arch, tokens, experts, hidden, inter, act_quant)
        rows.append(
            {
                "layout": name,
                "tokens": tokens,
                "experts": experts,
                "hidden": hidden,
                "inter": inter,
                "top_k": top_k,
                "backend": backend,
                "mode": "W4A4" if act_quant == "mxfp4" else "W4A16",
                "time_us": sec * 1e6,
                "bytes": nbytes,
                "flops": flops,
                "gbps": nbytes / sec / 1e9,
                "tflops": flops / sec / 1e12,
                "vs_torch_dequant": base_a / sec,
                "vs_sglang_bf16": (base_b / sec) if base_b else None,
                "sglang_bf16_note": sgl_note,
                "config": cfg if backend == "triton" else None,
                "config_tuned": tuned,
            }
        )
    return rows


def roofline_png(rows: list[dict], bw: float, peak: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(12, 5))
    xs = [r["flops"] / r["bytes"] for r in rows]
    lo, hi = min(xs + [0.1]) / 2, max(xs + [10.0]) * 2
    grid = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    ax.plot(grid, [min(peak, bw * x / 1e3) for x in grid], "k-", label="measured roof")
    for key in sorted({(r["layout"], r["backend"], r["mode"]) for r in rows}):
        sel = [r for r in rows if (r["layout"], r["backend"], r["mode"]) == key]
        label = " ".join(key)
        ax.plot(
            [r["flops"] / r["bytes"] for r in sel],
            [r["tflops"] for r in sel],
            "o-",
            label=label,
            markersize=4,
        )
        ax_t.plot(
            [r["tokens"] for r in sel], [r["time_us"] for r in sel], "o-", label=label, markersize=4
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax_t.set_xscale("log")
    ax_t.set_yscale("log")
    ax_t.set_xlabel("tokens")
    ax_t.set_ylabel("time per MoE call (us)")
    ax_t.set_title("time (GB/s and speedups in the JSON / table)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _versions() -> dict:
    try:
        import sglang

        sglang_version = getattr(sglang, "__version__", "?")
    except ImportError:  # GPU check machines run the kernels without SGLang
        sglang_version = "not installed"
    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "sglang": sglang_version,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few shapes and token counts")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results"))
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma list of layouts")
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU only: torch threads (1 avoids OpenMP spin-wait noise on a shared box)",
    )
    args = parser.parse_args(argv)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(args.threads)
    if device == "cuda":
        shapes = {k: LAYOUTS[k] for k in args.layouts.split(",")}
        tokens = (1, 16, 64, 1024) if args.quick else DECODE + PREFILL
        top_k, iters, with_triton = TOP_K, args.iters or 20, True
        bw = copy_bandwidth(device, 1 << 30, 10)
        peak = matrix_rate(device, 8192, 10)
        hardware = torch.cuda.get_device_name(0)
    else:
        # CPU: the toy model; the Triton kernels run in the interpreter (timing meaningless,
        # reported so the script's GPU path is exercised end to end).
        shapes, tokens, top_k = TOY, (1, 16, 64), 4
        iters, with_triton = args.iters or 5, args.quick
        bw = copy_bandwidth(device, 1 << 26, 5)
        peak = matrix_rate(device, 512, 5)
        hardware = f"{platform.machine()} CPU, {os.cpu_count()} cores, no GPU"

    rows: list[dict] = []
    header = (
        f"{'layout':<6} {'tok':>6} {'backend':<15} {'mode':<6} {'time us':>10} "
        f"{'GB/s':>8} {'%bw':>6} {'TFLOP/s':>8} {'%mm':>6} {'xdeq':>6} {'xsgl':>6}"
    )
    print(f"device: {hardware}; copy {bw:.1f} GB/s; matmul {peak:.2f} TFLOP/s")
    print(header)
    for name, shape in shapes.items():
        for t in tokens:
            triton_here = with_triton and (device == "cuda" or t == 1)
            for r in bench_case(name, shape, t, top_k, device, iters, triton_here):
                r["frac_bw"] = r["gbps"] / bw
                r["frac_matrix"] = r["tflops"] / peak
                rows.append(r)
                sgl = f"{r['vs_sglang_bf16']:.2f}" if r["vs_sglang_bf16"] else "n/a"
                print(
                    f"{r['layout']:<6} {t:>6} {r['backend']:<15} {r['mode']:<6} "
                    f"{r['time_us']:>10.1f} {r['gbps']:>8.1f} {100 * r['frac_bw']:>5.1f}% "
                    f"{r['tflops']:>8.3f} {100 * r['frac_matrix']:>5.1f}% "
                    f"{r['vs_torch_dequant']:>6.2f} {sgl:>6}"
                )

    targets = {}
    if device == "cuda":
        dec = [
            r
            for r in rows
            if r["backend"] == "triton" and r["mode"] == "W4A16" and r["tokens"] <= 64
        ]
        targets["w4a16_decode_min_frac_bw"] = min((r["frac_bw"] for r in dec), default=None)
        vs = [r["vs_sglang_bf16"] for r in dec if r["tokens"] <= 16 and r["vs_sglang_bf16"]]
        targets["w4a16_le16_min_speedup_vs_sglang_bf16"] = min(vs, default=None)
        print(f"targets (>= 0.70 of copy bw; >= 3x vs bf16 fused MoE): {targets}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"moe_{'cpu' if device == 'cpu' else current_arch()}{'_quick' if args.quick else ''}"
    meta = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hardware,
        "device": device,
        "versions": _versions(),
        "copy_gbps": bw,
        "matrix_tflops": peak,
        "quick": args.quick,
        "iters": iters,
        "cpu_threads": torch.get_num_threads() if device == "cpu" else None,
        "command": " ".join([Path(sys.argv[0]).name] + (argv or sys.argv[1:])),
        "note": "CPU timings of the Triton backend are Triton-interpreter timings"
        if device == "cpu"
        else "",
    }
    (out / f"{stem}.json").write_text(
        json.dumps({"meta": meta, "targets": targets, "rows": rows}, indent=1) + "\n"
    )
    roofline_png(
        rows, bw, peak, out / f"{stem}.png", f"fused MXFP4 MoE on {hardware} ({meta['date'][:10]})"
    )
    print(f"wrote {out / stem}.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
