"""report.html: one page a person reads for a run, a sweep or a verify: the verdict first (if
any), with its accuracy and acceptance gates and the claim's own arithmetic and price basis
(`verify --check`'s reading), then the points table, each point's SLO gates, token audit,
load-generator self-check and server metrics, the cost with its price source, warnings, then
the PNG plots (files beside the page). Self-contained apart from those PNGs; every value is
HTML-escaped."""

from __future__ import annotations

import html
from pathlib import Path

from sglang_mx.bench.claims.verdict import Verdict
from sglang_mx.bench.report.markdown import (
    COLUMNS,
    checks_lines,
    markdown,
    table_rows,
    verdict_lines,
)
from sglang_mx.bench.report.result import BenchResult
from sglang_mx.measure.compare import fmt_number
from sglang_mx.measure.result_files import plot, plot_labels, write_files

STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right}th{background:#f3f3f3}.verdict{font-size:1.4em;padding:.4em;"
    "border-radius:4px}.reproduced{background:#d8f5d8}.not{background:#f8d7d7}"
    ".inconclusive{background:#fff3cd}.warn{background:#fff3cd;padding:.3em}img{max-width:48%}"
)


def _e(x) -> str:
    return html.escape(str(x))


def _list(lines: list[str]) -> str:
    items = [ln for ln in lines if ln.strip()]
    return "<ul>" + "".join(f"<li>{_e(x.lstrip('- '))}</li>" for x in items) + "</ul>"


def _verdict(v: Verdict) -> str:
    cls = {"reproduced": "reproduced", "not reproduced": "not"}.get(v.verdict, "inconclusive")
    lines = verdict_lines(v)
    body = [ln for ln in lines[1:] if ln.strip()]
    return (
        f'<div class="verdict {cls}">Verdict: {_e(v.verdict.upper())}</div>'
        + _list([ln for ln in body if not ln.startswith("-") and ln != "Reasons:"])
        + "<h3>Reasons</h3>"
        + _list([ln for ln in body if ln.startswith("- ")])
    )


def _gates(v: Verdict) -> str:
    """The accuracy (agreement with --reference) and acceptance gates, measured against bound."""
    rows = []
    a = v.agreement
    if a:
        kl_ok = a["kl_max"] is None or a["kl_topk_mean"] <= a["kl_max"]
        ok = a["top1"] >= a["top1_min"] and kl_ok
        bound = f"top-1 >= {a['top1_min']:g}" + (
            f", KL <= {a['kl_max']:g}" if a["kl_max"] is not None else ""
        )
        got = f"top-1 {a['top1']:.3f}, top-{a['top_k']} KL {a['kl_topk_mean']:.3g} nats"
        rows.append(("accuracy: agreement with " + a["reference"], got, bound, ok))
    t = v.task_eval
    if t:
        lo, hi = t["ci95"]
        got = f"pass@1 {t['score']:.3f} ({t['passed']} of {t['problems']}; [{lo:.3f}, {hi:.3f}])"
        failed = any(r.startswith(f"accuracy: {t['task']}") and "below" in r for r in v.reasons)
        rows.append((f"accuracy: {t['task']}", got, f"claimed {t['claimed']:g}", not failed))
    s = v.acceptance
    if s:
        measured = [x for x in s["measured"] if x is not None]
        got = ", ".join(f"{x:.3g}" for x in measured) or "no draft ran"
        claimed, kind = s["claimed"], " (simulated: reported, not gated)" if s["simulated"] else ""
        ok = None  # not gated: no claimed length, or a simulated one
        if len(measured) < len(s["measured"]):
            ok = False  # a repeat ran no verify step: the draft was off
        elif claimed is not None and not s["simulated"] and measured:
            ok = sum(measured) / len(measured) >= claimed * (1 - v.tolerance)
        bound = "not stated" if claimed is None else f"claimed {claimed:g}{kind}"
        rows.append((f"acceptance ({s['algorithm']})", got, bound, ok))
    if not rows:
        return ""
    cells = "".join(
        f"<tr><td>{_e(n)}</td><td>{_e(g)}</td><td>{_e(b)}</td>"
        f"<td>{'' if ok is None else ('met' if ok else 'FAILED')}</td></tr>"
        for n, g, b, ok in rows
    )
    return (
        "<h2>Accuracy and acceptance</h2><table><tr><th>gate</th><th>measured</th>"
        f"<th>bound</th><th>result</th></tr>{cells}</table>"
    )


def _claim_check(record: dict) -> str:
    """The claim read before the run (`verify --check`): its arithmetic and price basis."""
    from sglang_mx.bench.claims.claim_check import render as render_check

    return f"<h2>The claim's arithmetic and price</h2><pre>{_e(render_check(record))}</pre>"


def _table(result: BenchResult) -> str:
    sweep = result.sweep
    head = "".join(f"<th>{_e(c)}</th>" for c in [sweep.kind, *(c for c, _ in COLUMNS)])
    rows = ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>"
            for cells in table_rows(sweep.points)]  # fmt: skip
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _audit_tables(result: BenchResult) -> str:
    out = []
    for p in result.sweep.points:
        a = p.summary.audit
        if not a:
            continue
        rows = []
        for c in a.checks:
            counts = ", ".join(
                f"{k} {fmt_number(float(c[k]))}" for k in ("client", "usage", "server") if k in c
            )
            if "requests_off" in c:
                counts = f"{c['requests_off']} requests short"
            state = "ok" if c["ok"] else "FAILED"
            rows.append(
                f"<tr><td>{_e(c['check'])}</td><td>{_e(counts)}</td><td>{_e(state)}</td></tr>"
            )
        out.append(
            f"<h3>Token audit, point {_e(p.x)}</h3><table><tr><th>check</th>"
            f"<th>counts</th><th>result</th></tr>{''.join(rows)}</table>"
        )
    return "".join(out)


def render(result: BenchResult, images: list[str]) -> str:
    st = result.stamp
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{_e(result.workload.get('name'))}</title><style>{STYLE}</style></head><body>",
        f"<h1>Benchmark: {_e(result.name)}</h1>",
        _list(
            [
                f"date: {st['date']}",
                f"hardware: {st['hardware']}",
                f"client host: {st['client_host']}",
                "versions: " + ", ".join(f"{k} {v}" for k, v in st["versions"].items()),
                f"commit: {st.get('commit', 'unknown')}",
            ]
        ),
    ]
    if result.claimed:
        parts.append(_verdict(result.claimed.verdict))
        parts.append(_gates(result.claimed.verdict))
        if result.claimed.claim_check:
            parts.append(_claim_check(result.claimed.claim_check))
    parts += [_table(result), "<h2>Checks</h2>", _list(checks_lines(result.sweep.points))]
    parts.append(_audit_tables(result))
    cost = result.cost
    if cost:
        parts.append(
            f"<h2>Cost</h2><p>${_e(cost['price_per_gpu_hour'])}/GPU-h; source: "
            f"{_e(cost.get('price_source') or 'not stated')}</p>"
        )
        parts.append(
            "<table>"
            + "".join(
                f"<tr><th>{_e(k)}</th><td>{_e(fmt_number(v))}</td></tr>"
                for k, v in cost.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            )
            + "</table>"
        )
    for w in result.warnings:
        parts.append(f'<p class="warn">WARNING: {_e(w)}</p>')
    parts.append("<h2>Plots</h2>")
    parts += [f'<img src="{_e(name)}" alt="{_e(name)}">' for name in images]
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(result: BenchResult, outdir: str | Path, plots: bool = True) -> dict[str, Path]:
    """result.json, report.md, the PNG plots and report.html of one result in `outdir`."""
    outdir = Path(outdir)
    names = ("result.json", "report.md")
    paths = write_files(outdir, names, result.to_dict(), markdown(result))
    if plots:
        title, footer = plot_labels(result.name, result.stamp)
        paths |= {p.stem: p for p in plot(result.sweep, result.gpus, title, footer, outdir)}
    images = [p.name for k, p in paths.items() if k not in ("json", "markdown")]
    paths["html"] = outdir / "report.html"
    paths["html"].write_text(render(result, images))
    return paths
