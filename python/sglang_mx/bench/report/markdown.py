"""report.md: a result's markdown summary, stamped with hardware, versions, config, date, and its
verdict and per-point check lines (the JSON and PNG plots: measure/result_files.py). It reads a
BenchResult (result.py); a single run is a sweep of one point."""

from __future__ import annotations

import json

from sglang_mx.bench.claims.verdict import Verdict
from sglang_mx.bench.report.result import BenchResult
from sglang_mx.measure.compare import fmt_number
from sglang_mx.measure.summary import check_figures
from sglang_mx.measure.sweep import SweepPoint

COLUMNS = (
    ("req/s", "request_throughput"),
    ("out tok/s", "output_tok_s"),
    ("total tok/s", "total_tok_s"),
    ("TTFT p50 s", "ttft_s.p50"),
    ("TTFT p95 s", "ttft_s.p95"),
    ("TPOT p50 s", "tpot_s.p50"),
    ("ITL p50 s", "itl_s.p50"),
    ("E2E p50 s", "e2e_s.p50"),
    ("hit rate", "hit_rate"),
    ("success", "success_rate"),
    ("goodput req/s", "goodput_req_s"),
    ("goodput out tok/s", "goodput_output_tok_s"),
)
check_figures((k for _, k in COLUMNS), "report.COLUMNS")


def x_name(kind: str) -> str:
    """A sweep's load as its table's first column names it."""
    return "rate (req/s)" if kind == "rate" else kind


def table_rows(points) -> list[list[str]]:
    """One row of cells per point: its load, then each of COLUMNS."""
    return [
        [fmt_number(float(p.x))] + [fmt_number(p.summary.value(k)) for _, k in COLUMNS]
        for p in points
    ]


def markdown(result: BenchResult) -> str:
    st, sweep = result.stamp, result.sweep
    x = x_name(sweep.kind)
    lines = [
        f"# Benchmark: {result.name}",
        "",
        f"- date: {st['date']}",
        f"- hardware: {st['hardware']} ({result.gpus} GPU(s) counted for cost)",
        f"- client host: {st['client_host']}",
        f"- versions: {', '.join(f'{k} {v}' for k, v in st['versions'].items())}",
        f"- config: `{json.dumps(st.get('config', {}), sort_keys=True)}`",
        f"- workload: `{json.dumps(result.workload, sort_keys=True)}`",
        "",
        "| " + " | ".join([x] + [c for c, _ in COLUMNS]) + " |",
        "|" + "---:|" * (len(COLUMNS) + 1),
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(sweep.points)]
    lines.append("")
    for p in sweep.points:
        s = p.summary
        if s.errors:
            lines.append(
                f"Failed requests at {x} {p.x}: {s.errors} of {s.requests}; "
                f"first: `{(s.first_error or '')[:300]}`"
            )
            lines.append("")
    slo_text = sweep.slo_text or f"TTFT p95 <= {sweep.slo} s"
    if result.claimed:
        lines += verdict_lines(result.claimed.verdict)
    elif sweep.knee:
        k = sweep.knee
        lines.append(
            f"Knee ({slo_text}, 100% success): {x} {k.x}, "
            f"{fmt_number(k.output_tok_s)} output tok/s, TTFT p95 {fmt_number(k.ttft_p95_s)} s."
        )
    else:
        lines.append(f"No point met {slo_text} with 100% success.")
    lines += ["", "Checks:", ""] + checks_lines(sweep.points)
    cost = result.cost
    if cost:
        if cost.get("price_source"):
            lines += [
                "",
                f"Price: ${cost['price_per_gpu_hour']:g}/GPU-h, source: {cost['price_source']}.",
            ]
        lines += ["", "| cost figure | value |", "|---|---:|"]
        lines += [f"| {k} | {fmt_number(v)} |" for k, v in cost.items()
                  if isinstance(v, (int, float))]  # fmt: skip
    for w in result.warnings:
        lines.append(f"\n> WARNING: {w}")
    return "\n".join(lines) + "\n"


def verdict_lines(v: Verdict) -> list[str]:
    lo, hi = v.ci95
    lines = [
        f"## Verdict: {v.verdict.upper()}",
        "",
        f"Claim `{v.claim}`: {v.claim_text}.",
        f"Measured {v.figure} per {v.per}: {fmt_number(v.measured)} over {v.repeats} "
        f"repeats, 95% interval [{fmt_number(lo)}, {fmt_number(hi)}], "
        f"measured / claimed {v.ratio:.4g}.",
        "",
    ]
    if v.scaled:
        lines += ["**THE WORKLOAD WAS SCALED** to run here:", ""]
        lines += [f"- {c}" for c in v.changes] + [""]
    lines += ["Reasons:", ""] + [f"- {r}" for r in v.reasons] + [""]
    return lines


def checks_lines(points: tuple[SweepPoint, ...]) -> list[str]:
    """Per point: SLO gates, token audit, self-check and server metrics, one line each."""
    lines = []
    for p in points:
        s, x = p.summary, p.x
        gates = ", ".join(
            f"{g['metric'][:-2]} p{g['percentile']} {fmt_number(g['value'])} "
            f"{'<=' if g['met'] else '>'} {g['limit']:g}"
            for g in s.slo_gates or ()
        )
        lines.append(f"- point {x}: SLO {'met' if s.slo_met else 'MISSED'} ({gates})")
        if s.expected_cached_tokens:
            lines.append(
                f"  - cached tokens: {s.cached_tokens} measured; "
                f"{_or_dash(s.reachable_cached_tokens)} held when each request was sent, "
                f"{_or_dash(s.possible_cached_tokens)} by its first token, "
                f"{s.expected_cached_tokens} designed"
            )
        a = s.audit
        if a:
            state = "ok" if a.ok else f"FAILED: {a.message}"
            lines.append(
                f"  - token audit {state} ({len(a.checks)} checks"
                + (f"; skipped: {'; '.join(a.skipped)}" if a.skipped else "")
                + ")"
            )
        c = s.selfcheck
        if c:
            lag = c.schedule_lag_s
            lines.append(
                f"  - load generator: schedule lag min {fmt_number(lag.min * 1e3)}"
                f" / p50 {fmt_number(lag.p50 * 1e3)} / p99 "
                f"{fmt_number(lag.p99 * 1e3)} ms, loop lag p99 "
                f"{fmt_number(c.loop_lag_s.p99 * 1e3)} ms, "
                f"client CPU {c.client_cpu_fraction:.0%} of a core"
                + (f"; CLIENT-BOUND: {'; '.join(c.reasons)}" if c.client_bound else "")
            )
        m = s.server_metrics
        if m and m.samples:
            parts = [
                f"{k} mean {fmt_number(v['mean'])} max {fmt_number(v['max'])}"
                for k, v in m.gauges.items()
            ]
            lines.append(
                f"  - server ({m.engine} /metrics, {m.samples} samples): " + ", ".join(parts)
            )
    return lines


def _or_dash(n: int | None) -> str:
    return "-" if n is None else str(n)
