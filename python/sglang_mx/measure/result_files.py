"""A result on disk: its JSON, its markdown and, for a sweep, the PNG plots (throughput vs load,
TTFT p50/p95 vs load, throughput per GPU vs tokens/s per user), the same files for a measured
run (`bench`) and a simulated one (`plan`)."""

from __future__ import annotations

import json
from pathlib import Path

from sglang_mx.measure.sweep import Sweep


def plot(sweep: Sweep, gpus: int, title: str, footer: str, outdir: Path) -> list[Path]:
    """The three PNGs of a sweep in `outdir`: `title` above each, `footer` (its stamp) below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = max(1, int(gpus))
    xs = [float(p.x) for p in sweep.points]
    s = [p.summary for p in sweep.points]
    x_label = "request rate (req/s)" if sweep.kind == "rate" else sweep.kind
    paths = []

    def finish(fig, ax, name: str) -> None:
        ax.set_title(title, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.text(0.01, 0.01, footer, fontsize=6)
        path = outdir / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [x.output_tok_s for x in s], "o-", label="output tok/s")
    ax.plot(xs, [x.total_tok_s for x in s], "s--", label="total tok/s")
    ax.set_xlabel(x_label)
    ax.set_ylabel("tokens/s per node")
    finish(fig, ax, "throughput_vs_load.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [x.ttft_s.p50 for x in s], "o-", label="TTFT p50")
    ax.plot(xs, [x.ttft_s.p95 for x in s], "s-", label="TTFT p95")
    ax.axhline(sweep.slo, color="red", lw=0.8, ls=":", label="SLO")
    ax.set_xlabel(x_label)
    ax.set_ylabel("seconds")
    finish(fig, ax, "ttft_vs_load.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(
        [x.output_tok_s_per_user.p50 for x in s],
        [x.output_tok_s / gpus for x in s],
        "o-",
        label="sweep points",
    )
    ax.set_xlabel("output tokens/s per user (median)")
    ax.set_ylabel("output tokens/s per GPU")
    finish(fig, ax, "throughput_per_gpu_vs_per_user.png")
    return paths


def plot_labels(workload_name: str, stamp: dict) -> tuple[str, str]:
    """A sweep plot's title and footer from its workload's name and its provenance stamp."""
    title = f"{workload_name} on {stamp['hardware']}"
    return title, f"{stamp['date']}  sglang {stamp['versions'].get('sglang')}"


def write_files(outdir: Path, names: tuple[str, str], record: dict, text: str) -> dict:
    """A result's JSON (`record`) and markdown (`text`) in `outdir` under the (json, markdown)
    `names`; their paths by kind (json, markdown)."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = {"json": outdir / names[0], "markdown": outdir / names[1]}
    paths["json"].write_text(json.dumps(record, indent=1, default=str))
    paths["markdown"].write_text(text)
    return paths
