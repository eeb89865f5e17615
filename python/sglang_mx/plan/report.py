"""Plan reports: a markdown table per layout, the knee and the binding resource, JSON, and
plots (bench's throughput / TTFT / per-GPU-vs-per-user plots per layout, plus one plot of TTFT
p95 against rate over all layouts with the roofline as the limit line)."""

from __future__ import annotations

import json
from pathlib import Path

from sglang_mx.measure.compare import fmt_number
from sglang_mx.measure.sweep import SweepPoint
from sglang_mx.plan.records import Plan, PlanPoint


def _row(p: SweepPoint, gpus: int) -> list[str]:
    s, sim = p.summary, PlanPoint.of(p)
    binding = sim.binding
    return [
        fmt_number(float(p.x)),
        fmt_number(s.output_tok_s),
        fmt_number(s.total_tok_s),
        fmt_number(s.total_tok_s / gpus),
        fmt_number(s.ttft_s.p50),
        fmt_number(s.ttft_s.p95),
        fmt_number(s.itl_s.p50 * 1e3),
        fmt_number(s.itl_s.p90 * 1e3),
        fmt_number(s.e2e_s.p50),
        fmt_number(s.goodput_output_tok_s),
        fmt_number(sim.cost["usd_per_m_output"]),
        f"{binding} {sim.binding_share[binding]:.0%}" if binding else "-",
        fmt_number(sim.roofline_output_tok_s),
    ]


HEAD = (
    "x",
    "out tok/s",
    "total tok/s",
    "total tok/s/GPU",
    "TTFT p50 s",
    "TTFT p95 s",
    "ITL p50 ms",
    "ITL p90 ms",
    "E2E p50 s",
    "goodput out tok/s",
    "$/M out",
    "binding",
    "roofline out tok/s",
)


def _plan(result: Plan | dict) -> Plan:
    return result if isinstance(result, Plan) else Plan.from_dict(result)


def markdown(result: Plan | dict) -> str:
    plan = _plan(result)
    st = plan.stamp
    lines = [
        f"# Plan: {plan.model} on {plan.gpus}x {plan.hardware}",
        "",
        f"- date: {st['date']}; planner host: {st['client_host']}",
        f"- versions: {', '.join(f'{k} {v}' for k, v in st['versions'].items())}",
        f"- efficiency: {plan.efficiency}; link: {plan.link}"
        + (f"; PD KV over: {plan.scaleout}" if plan.scaleout else ""),
        f"- SLA: {plan.slo['text']}"
        if "text" in plan.slo  # plans written before issue 60 recorded TTFT and TPOT only
        else f"- SLA: TTFT p95 <= {plan.slo['ttft_p95_s']} s"
        + (f", TPOT <= {plan.slo['tpot_s']} s" if plan.slo.get("tpot_s") else ""),
        f"- workload: `{json.dumps(plan.workload, sort_keys=True)}`",
        "",
        "Simulated (SGLang 0.5.23 scheduler model), not measured.",
    ]
    for sw in plan.sweeps:
        lines += ["", f"## {sw.layout}", ""]
        lines += ["| " + " | ".join(HEAD).replace("x", sw.kind, 1) + " |"]
        lines += ["|" + "---:|" * len(HEAD)]
        lines += ["| " + " | ".join(_row(p, plan.gpus)) + " |" for p in sw.points]
        lines += [
            "",
            f"Knee ({sw.kind} where TTFT p95 reaches the SLA; the last point if it never "
            f"does): {fmt_number(sw.knee_rate)}; roofline "
            f"{fmt_number(sw.roofline['output_tok_s'])} out tok/s ({sw.roofline['bound']}).",
        ]
    best = plan.best
    if best:
        lines += [
            "",
            f"Best layout at the SLA: **{best.layout}** at {best.x} "
            f"({fmt_number(best.goodput_output_tok_s)} goodput out tok/s, "
            f"{fmt_number(best.output_tokens_per_usd)} out tokens per $).",
        ]
    return "\n".join(lines) + "\n"


def plot(result: Plan | dict, outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = _plan(result)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for sw in plan.sweeps:
        xs = [float(p.x) for p in sw.points]
        a1.plot(xs, [p.summary.ttft_s.p95 for p in sw.points], "o-", label=sw.layout)
        line = a2.plot(xs, [p.summary.output_tok_s for p in sw.points], "o-", label=sw.layout)
        a2.axhline(sw.roofline["output_tok_s"], color=line[0].get_color(), ls=":", lw=0.8)
    a1.axhline(plan.slo["ttft_p95_s"], color="red", ls=":", lw=0.8, label="SLA")
    a1.set_yscale("log")
    a1.set_ylabel("TTFT p95 (s)")
    a2.set_ylabel("output tok/s (dotted: roofline)")
    for ax in (a1, a2):
        ax.set_xlabel(plan.sweeps[0].kind)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"plan: {plan.model} on {plan.gpus}x {plan.hardware} "
        f"({plan.efficiency}), simulated {plan.stamp['date'][:10]}",
        fontsize=8,
    )
    path = outdir / "plan_layouts.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path, _plot_binding(plan, outdir, plt)]


def _plot_binding(plan: Plan, outdir: Path, plt) -> Path:
    """Share of busy time each resource bound, per layout and load (stacked bars)."""
    sweeps = plan.sweeps
    fig, axes = plt.subplots(1, len(sweeps), figsize=(4 * len(sweeps), 3.5), squeeze=False)
    shares = [[PlanPoint.of(p).binding_share for p in sw.points] for sw in sweeps]
    names = sorted({k for sw in shares for share in sw for k in share})
    for ax, sw, sw_shares in zip(axes[0], sweeps, shares, strict=True):
        xs = [str(p.x) for p in sw.points]
        bottom = [0.0] * len(xs)
        for name in names:
            vals = [share.get(name, 0.0) for share in sw_shares]
            ax.bar(xs, vals, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_title(sw.layout, fontsize=8)
        ax.set_xlabel(sw.kind)
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("share of busy time")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(f"binding resource (simulated), {plan.gpus}x {plan.hardware}", fontsize=8)
    path = outdir / "plan_binding.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(plan: Plan, outdir: str | Path, plots: bool = True) -> dict[str, Path]:
    """plan.json (`plan.to_dict()`), plan.md and, with `plots`, the plan's plots and the sweep
    plots (measure.result_files) of each layout's sweep in its own folder."""
    from sglang_mx.measure.result_files import plot as sweep_plot
    from sglang_mx.measure.result_files import plot_labels, write_files
    from sglang_mx.measure.sweep import Sweep

    outdir = Path(outdir)
    paths = write_files(outdir, ("plan.json", "plan.md"), plan.to_dict(), markdown(plan))
    if plots:
        paths |= {p.stem: p for p in plot(plan, outdir)}
        for sw in plan.sweeps:
            sub = outdir / sw.layout.replace(":", "_").replace("+", "_")
            sub.mkdir(exist_ok=True)
            hw = f"{plan.gpus}x {plan.hardware} {sw.layout} (simulated)"
            name = plan.workload.get("name", "custom")
            title, footer = plot_labels(name, {**plan.stamp, "hardware": hw})
            sweep = Sweep(sw.kind, sw.points, sw.knee, sw.slo)
            for p in sweep_plot(sweep, plan.gpus, title, footer, sub):
                paths[f"{sw.layout}/{p.stem}"] = p
    return paths
