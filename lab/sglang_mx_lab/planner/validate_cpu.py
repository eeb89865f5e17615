"""Check the planner against a live server on this CPU box, in one command:

    .venv/bin/python -m sglang_mx_lab.planner.validate_cpu

starts the bundled model (`sglang-mx serve` defaults), reads the scheduler settings it runs
with (/get_server_info), calibrates the step cost from a few measured batches, predicts a
`sglang-mx bench` rate sweep, runs that sweep, and writes the comparison (knee_rate_err,
per-rate p50/p90 TTFT and ITL errors, load average) to docs/results/planner-validation-cpu.json
with a plot beside it. The prediction is frozen in the file before the sweep runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import httpx
from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer, materialize
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.capacity.workload import WorkloadSpec
from sglang_mx.measure.metrics import Slo, summarize
from sglang_mx.measure.stamp import stamp
from sglang_mx.measure.sweep import sweep_specs
from sglang_mx.measure.tracegen import generate
from sglang_mx.plan.knee import knee_rate, search_knee
from sglang_mx.plan.scheduler_config import SchedulerConfig
from sglang_mx.plan.sim import build_groups, simulate

from sglang_mx_lab.planner import step_fit

OUT = Path("docs/results/planner-validation-cpu.json")
# sweep rates as fractions of the predicted knee: four below it, two past it (so the measured
# sweep crosses the SLA too unless the prediction is > 40% pessimistic)
RATE_FRACTIONS = (0.3, 0.5, 0.7, 0.9, 1.15, 1.4)
SLO_FACTOR = 4.0  # knee SLA: TTFT p95 = 4x the predicted TTFT p50 at a low rate
LOW_RATE = 0.05  # req/s: requests never overlap


def workload(num_requests: int, output_len: int = 16) -> WorkloadSpec:
    return WorkloadSpec.fixed(
        f"cpu-validate-128-{output_len}-50",
        128,
        output_len,
        hit_rate=0.5,
        prefix_groups=2,
        num_requests=num_requests,
        rate=1.0,
    )


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure_point(spec, cfg: RunConfig, tokens, slo_s: float) -> dict:
    """One sweep point's run summary, held to TTFT p95 <= slo_s."""
    trace = generate(spec)
    slo = Slo(ttft_p95_s=slo_s, ttft_s=slo_s)
    return run_trace(trace, materialize(trace, tokens), cfg, tokens, slo).summary.to_dict()


def sweep_rates(rates: list[float], spec: WorkloadSpec, measure) -> list[dict]:
    """Both validations' measured sweep: `measure(rate, point)` at each rate of `spec`, in
    order, each summary printed as it comes; [{"x": rate, "summary": ...}]."""
    measured = []
    for rate, point in zip(rates, sweep_specs(spec, "rate", rates), strict=True):
        summary = measure(rate, point)
        measured.append({"x": rate, "summary": summary})
        print(
            f"rate {rate}: measured TTFT p50 {summary['ttft_s']['p50']:.3f} s p95 "
            f"{summary['ttft_s']['p95']:.3f} s, ITL p50 {summary['itl_s']['p50']:.3f} s, "
            f"load {loadavg()}",
            file=sys.stderr,
        )
    return measured


def calibrate_live(cfg: RunConfig, tokens) -> step_fit.Calibration:
    """Replay step_fit.traces() (lone prompts, decode batches, batched prefill) on the server
    and fit the step cost to what they measured."""
    slo_any = Slo(ttft_p95_s=1e9, ttft_s=None)
    results = {}
    for name, trace in step_fit.traces().items():
        run = run_trace(trace, materialize(trace, tokens), cfg, tokens, slo_any)
        results[name] = run.results
        bad = [r.error for r in run.results if not r.ok]
        if bad:
            print(f"calibration {name}: {len(bad)} failed, first: {bad[0]}", file=sys.stderr)
    return step_fit.fit(step_fit.observations(results))


def scheduler_config(base_url: str) -> tuple[SchedulerConfig, dict]:
    info = httpx.get(f"{base_url}/get_server_info", timeout=30).json()
    states = info.get("internal_states") or [{}]
    if not info.get("max_running_requests"):
        info["max_running_requests"] = states[0].get("max_running_requests") or 1024
    keys = (
        "max_total_num_tokens",
        "max_running_requests",
        "chunked_prefill_size",
        "page_size",
        "schedule_policy",
        "max_prefill_tokens",
        "disable_overlap_schedule",
        "device",
        "enable_mixed_chunk",
        "schedule_conservativeness",
    )
    return SchedulerConfig.from_server_info(info), {k: info.get(k) for k in keys}


def predict(spec: WorkloadSpec, rates, sched: SchedulerConfig, cal) -> list[dict]:
    out = []
    for rate, point in zip(rates, sweep_specs(spec, "rate", rates), strict=True):
        res = simulate(generate(point), build_groups(sched, cal.cost))
        out.append({"x": rate, "summary": summarize(res.request_results(cal.frontend_s)).to_dict()})
    return out


def predicted_knee(spec: WorkloadSpec, sched: SchedulerConfig, cal) -> tuple[float, float]:
    """(knee SLA, predicted knee rate): the SLA is SLO_FACTOR x the simulated TTFT p50 at
    LOW_RATE; the knee is where the simulated TTFT p95 crosses it, on a 10% rate grid
    interpolated by knee_rate."""
    return search_knee(lambda r: predict(spec, [r], sched, cal)[0], LOW_RATE, SLO_FACTOR)


def _err(pred: float, meas: float) -> float:
    return (pred - meas) / meas if meas else float("nan")


def compare(pred: list[dict], meas: list[dict], slo_s: float) -> dict:
    rows = []
    for p, m in zip(pred, meas, strict=True):
        ps, ms = p["summary"], m["summary"]
        row = {"rate": p["x"]}
        for metric in ("ttft_s", "itl_s"):
            for q in ("p50", "p90"):
                row[f"{metric}_{q}_pred"] = ps[metric][q]
                row[f"{metric}_{q}_meas"] = ms[metric][q]
                row[f"{metric}_{q}_err"] = _err(ps[metric][q], ms[metric][q])
        rows.append(row)
    k_pred, k_meas = knee_rate(pred, slo_s), knee_rate(meas, slo_s)
    # knee_rate returns the last rate when TTFT p95 never reaches the SLA: no knee was seen
    reached = {
        "pred": max(p["summary"]["ttft_s"]["p95"] for p in pred) > slo_s,
        "meas": max(m["summary"]["ttft_s"]["p95"] for m in meas) > slo_s,
    }
    knee_ok = reached["pred"] and reached["meas"] and abs(_err(k_pred, k_meas)) <= 0.25
    below = [r for r in rows if r["rate"] < k_meas]
    ok50 = [
        r for r in below if abs(r["ttft_s_p50_err"]) <= 0.25 and abs(r["itl_s_p50_err"]) <= 0.25
    ]
    ok90 = [
        r for r in below if abs(r["ttft_s_p90_err"]) <= 0.40 and abs(r["itl_s_p90_err"]) <= 0.40
    ]
    return {
        "slo_ttft_p95_s": slo_s,
        "knee_rate_pred": k_pred,
        "knee_rate_meas": k_meas,
        "knee_rate_err": _err(k_pred, k_meas),
        "knee_reached": reached,
        "rows": rows,
        "targets": {
            "knee_within_25pct": knee_ok,
            "rates_below_knee": len(below),
            "rates_p50_within_25pct": len(ok50),
            "rates_p90_within_40pct": len(ok90),
            "met": knee_ok and len(ok50) >= 3 and len(ok90) >= 3,
        },
    }


def plot(result: dict, path: Path, what: str = "bundled tiny GLM-5 MXFP4") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["comparison"]["rows"]
    xs = [r["rate"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric, label in ((axes[0], "ttft_s", "TTFT"), (axes[1], "itl_s", "ITL")):
        for q, style in (("p50", "o"), ("p90", "s")):
            ax.plot(xs, [r[f"{metric}_{q}_meas"] for r in rows], style + "-", label=f"{q} measured")
            ax.plot(
                xs, [r[f"{metric}_{q}_pred"] for r in rows], style + "--", label=f"{q} predicted"
            )
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel(f"{label} (s)")
        ax.grid(alpha=0.3)
    cmp_ = result["comparison"]
    axes[0].axhline(cmp_["slo_ttft_p95_s"], color="red", ls=":", lw=0.8, label="knee SLA (p95)")
    for x, ls in ((cmp_["knee_rate_meas"], "-"), (cmp_["knee_rate_pred"], "--")):
        axes[0].axvline(x, color="gray", ls=ls, lw=0.8)
    axes[0].legend(fontsize=7)
    st = result["stamp"]
    fig.suptitle(
        f"plan vs measured: {what} on {st['client_host']}; "
        f"{st['date']}; load {result['load_average']['sweep_start']}",
        fontsize=7,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m sglang_mx_lab.planner.validate_cpu", description=__doc__
    )
    ap.add_argument("--url", help="use this running server instead of starting one")
    ap.add_argument("--num-requests", type=int, default=40, help="requests per sweep point")
    ap.add_argument("--output-len", type=int, default=16, help="output tokens per request")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    from sglang_mx.assets import bundled_model_path

    t_start = time.time()  # wall time includes the server start
    model_dir = bundled_model_path("glm5-mxfp4")
    server = None
    if args.url:
        base_url = args.url.rstrip("/")
    else:
        from sglang_mx_lab.testing.server import start_server

        server = start_server(model_dir, ["--enable-cache-report"])
        base_url = server.base_url
    try:
        return _validate(base_url, model_dir, args, t_start)
    finally:
        if server is not None:
            server.stop()


def _validate(base_url: str, model_dir, args, t_start: float) -> int:
    tokens = SegmentTokens(load_tokenizer(model_dir))
    cfg = RunConfig(base_url=base_url, progress=False, warmup=1)
    sched, info = scheduler_config(base_url)
    load = {"calibration_start": loadavg()}
    t0 = time.time()
    cal = calibrate_live(cfg, tokens)
    load["calibration_end"] = loadavg()
    calibration_wall_s = time.time() - t0
    print(f"calibrated in {calibration_wall_s:.0f} s: {cal.terms}", file=sys.stderr)
    spec = workload(args.num_requests, args.output_len)
    slo_s, knee = predicted_knee(spec, sched, cal)
    rates = [round(knee * f, 3) for f in RATE_FRACTIONS]
    predicted = predict(spec, rates, sched, cal)
    result = {
        "stamp": stamp(None, {"server": info, "scheduler_model": sched.to_dict()}),
        "what": "planner prediction vs a measured `sglang-mx bench` rate sweep of the bundled "
        "tiny GLM-5 MXFP4 model served by SGLang 0.5.23 on this CPU box",
        "command": "python -m sglang_mx_lab.planner.validate_cpu " + " ".join(sys.argv[1:]),
        "workload": spec.to_dict(),
        "calibration": cal.to_dict(),
        "calibration_wall_s": calibration_wall_s,
        "rates": rates,
        "rate_fractions_of_predicted_knee": list(RATE_FRACTIONS),
        "predicted": predicted,
        "slo_ttft_p95_s": slo_s,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str))  # prediction frozen first
    load["sweep_start"] = loadavg()
    t1 = time.time()
    measured = sweep_rates(rates, spec, lambda _, p: measure_point(p, cfg, tokens, slo_s))
    load["sweep_end"] = loadavg()
    result.update(
        {
            "measured": measured,
            "sweep_wall_s": time.time() - t1,
            "wall_s": time.time() - t_start,
            "load_average": load,
            "comparison": compare(predicted, measured, slo_s),
        }
    )
    args.out.write_text(json.dumps(result, indent=1, default=str))
    plot(result, args.out.with_suffix(".png"))
    c = result["comparison"]
    print(json.dumps({k: v for k, v in c.items() if k != "rows"}, indent=1))
    print(markdown(result))
    return 0


def markdown(result: dict) -> str:
    """The comparison as a markdown table (docs/planner.md quotes it)."""
    c = result["comparison"]
    lines = [
        "| rate req/s | TTFT p50 pred / meas (err) | TTFT p90 pred / meas (err) | "
        "ITL p50 pred / meas (err) | ITL p90 pred / meas (err) |",
        "|---:|---|---|---|---|",
    ]
    for r in c["rows"]:
        cells = [f"{r['rate']:.3g}"]
        for m in ("ttft_s_p50", "ttft_s_p90", "itl_s_p50", "itl_s_p90"):
            cells.append(f"{r[m + '_pred']:.2f} / {r[m + '_meas']:.2f} s ({r[m + '_err']:+.0%})")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        f"\nknee (TTFT p95 = {c['slo_ttft_p95_s']:.1f} s): predicted {c['knee_rate_pred']:.3g}, "
        f"measured {c['knee_rate_meas']:.3g} req/s, knee_rate_err {c['knee_rate_err']:+.0%} "
        f"(SLA reached: predicted {c['knee_reached']['pred']}, measured "
        f"{c['knee_reached']['meas']})"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
