"""A result on disk: its JSON, its markdown and, for a sweep, the PNG plots (throughput vs load,
TTFT p50/p95 vs load, throughput per GPU vs tokens/s per user), the same files for a measured
run (`bench`) and a simulated one (`plan`)."""

from __future__ import annotations

import json
from pathlib import Path


def plot(result: dict, outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep, gpus = result["sweep"], max(1, int(result.get("gpus", 1)))
    xs = [float(p["x"]) for p in sweep["points"]]
    s = [p["summary"] for p in sweep["points"]]
    x_label = "request rate (req/s)" if sweep["kind"] == "rate" else sweep["kind"]
    title = f"{result['workload'].get('name', 'custom')} on {result['stamp']['hardware']}"
    stamp_txt = f"{result['stamp']['date']}  sglang {result['stamp']['versions'].get('sglang')}"
    paths = []

    def finish(fig, ax, name: str) -> None:
        ax.set_title(title, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.text(0.01, 0.01, stamp_txt, fontsize=6)
        path = outdir / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [x["output_tok_s"] for x in s], "o-", label="output tok/s")
    ax.plot(xs, [x["total_tok_s"] for x in s], "s--", label="total tok/s")
    ax.set_xlabel(x_label)
    ax.set_ylabel("tokens/s per node")
    finish(fig, ax, "throughput_vs_load.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [x["ttft_s"]["p50"] for x in s], "o-", label="TTFT p50")
    ax.plot(xs, [x["ttft_s"]["p95"] for x in s], "s-", label="TTFT p95")
    ax.axhline(sweep.get("slo", 5.0), color="red", lw=0.8, ls=":", label="SLO")
    ax.set_xlabel(x_label)
    ax.set_ylabel("seconds")
    finish(fig, ax, "ttft_vs_load.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(
        [x["output_tok_s_per_user"]["p50"] for x in s],
        [x["output_tok_s"] / gpus for x in s],
        "o-",
        label="sweep points",
    )
    ax.set_xlabel("output tokens/s per user (median)")
    ax.set_ylabel("output tokens/s per GPU")
    finish(fig, ax, "throughput_per_gpu_vs_per_user.png")
    return paths


def write_files(
    result: dict, outdir: Path, names: tuple[str, str], render, plotter, plots: bool
) -> dict[str, Path]:
    """`result` as JSON and as the markdown `render` makes, under the (json, markdown) `names`,
    plus `plotter`'s PNGs when `plots`; the paths by kind (json, markdown, each plot's stem)."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = {"json": outdir / names[0], "markdown": outdir / names[1]}
    paths["json"].write_text(json.dumps(result, indent=1, default=str))
    paths["markdown"].write_text(render(result))
    if plots:
        for p in plotter(result, outdir):
            paths[p.stem] = p
    return paths
