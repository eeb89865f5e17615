"""Check the planner's PD model against a live prefill/decode pair on this CPU box, in one command:

    PYTHONPATH=$PWD/python:$PWD/sgl-kernel-rocm .venv/bin/python -m sglang_mx.plan.validate_pd_cpu

1. a plain server on the default tiny GLM-5, bound to one core (each PD side gets one core of
   this 2-core box): the step cost is calibrated from its batches (calibrate.py), and lone
   prompts at two lengths measure its TTFT;
2. a prefill and a decode server (Mooncake over TCP on loopback, one core each) behind
   sglang-router's PD mode: the same lone prompts through the router; the handoff (latency +
   per-token transfer) is fitted from the difference (handoff.py);
3. the PD rate sweep is predicted with prefill and decode engines and the fitted handoff, and
   frozen in docs/results/planner-validation-pd-cpu.json before it is measured through the
   router with bench's runner; the knee is judged on those rates, which fit nothing.

The box is shared: the file records the load average at each stage."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx

from sglang_mx.bench.limits import fetch_limits
from sglang_mx.bench.metrics import Slo, summarize
from sglang_mx.bench.modelspec import load_model
from sglang_mx.bench.prompts import SegmentTokens, load_tokenizer, materialize
from sglang_mx.bench.runner import RunConfig, run_trace
from sglang_mx.bench.stamp import stamp
from sglang_mx.bench.sweep import sweep_specs
from sglang_mx.bench.tracegen import generate
from sglang_mx.bench.workload import WorkloadSpec
from sglang_mx.plan import calibrate
from sglang_mx.plan.config import SchedulerConfig
from sglang_mx.plan.handoff import Handoff, HandoffSample, fit_handoff
from sglang_mx.plan.knee import search_knee
from sglang_mx.plan.sim import Group, build_groups, simulate
from sglang_mx.plan.stepcost import Work
from sglang_mx.plan.validate_cpu import (
    LOW_RATE,
    RATE_FRACTIONS,
    SLO_FACTOR,
    calibrate_live,
    compare,
    loadavg,
    markdown,
    plot,
    scheduler_config,
    workload,
)

OUT = Path("docs/results/planner-validation-pd-cpu.json")
LONE_LENS = (64, 448)  # handoff fit: two prompt lengths; prompt + output stay under 512
LONE_REPEATS = 5
KV_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0}
BOX_NOTE = (
    "2-core x86_64 CPU box shared with other sessions (their tests and servers may run at the "
    "same time): the load averages below say how busy it was; an accuracy claim holds only "
    "where they stay near the 2 cores this run uses"
)


def pd_groups(prefill: SchedulerConfig, decode: SchedulerConfig, cost) -> list[Group]:
    return build_groups(prefill, cost, role="prefill") + build_groups(decode, cost, role="decode")


def predict(spec: WorkloadSpec, rates, sides, cal, handoff: Handoff) -> list[dict]:
    """Simulated sweep points: `sides` = (prefill, decode) scheduler configs."""
    out = []
    for rate, point in zip(rates, sweep_specs(spec, "rate", rates), strict=True):
        groups = pd_groups(*sides, cal.cost)
        res = simulate(
            generate(point), groups, handoff_s=handoff, handoff_serial_s=handoff.serial_s
        )
        out.append({"x": rate, "summary": summarize(res.request_results(cal.frontend_s))})
    return out


def predicted_knee(spec: WorkloadSpec, sides, cal, handoff: Handoff) -> tuple[float, float]:
    return search_knee(lambda r: predict(spec, [r], sides, cal, handoff)[0], LOW_RATE, SLO_FACTOR)


def kv_bytes_per_token(model_dir, info: dict) -> float:
    """What one prompt token ships: the model's latent + index-key bytes at the served KV dtype
    (/get_server_info kv_cache_dtype; auto = the model dtype)."""
    kv = str(info.get("kv_cache_dtype") or "auto")
    kv_bytes = 1.0 if "fp8" in kv else KV_DTYPE_BYTES.get(str(info.get("dtype")), 2.0)
    return load_model(str(model_dir)).kv_bytes_per_token(kv_bytes, 1.0)


def handoff_samples(pd: dict[int, float], plain: dict[int, float], cost) -> list[HandoffSample]:
    """One sample per prompt length from the two servers' median lone TTFTs; the plain
    server's first decode step (context prompt + 1) is the calibrated one."""
    return [
        HandoffSample(n, pd[n], plain[n], cost([Work(decode=[n + 1])]).seconds)
        for n in sorted(pd)
        if n in plain
    ]


def lone_ttfts(cfg: RunConfig, tokens, lens, repeats: int, raw=None) -> dict[int, float]:
    """Median TTFT of `repeats` lone prompts per length (each a fresh token run); `raw`, when
    given, collects every TTFT per length."""
    import numpy as np

    out = {}
    for n in lens:
        trace = calibrate.lone_trace(f"lone-pd{n}", n, repeats)
        slo_any = Slo(ttft_p95_s=1e9, ttft_s=None)
        run = run_trace(trace, materialize(trace, tokens), cfg, tokens, slo_any)
        ok = [r.ttft for r in run.results if r.ok]
        if not ok:
            raise RuntimeError(f"lone {n}-token prompts all failed at {cfg.base_url}")
        out[n] = float(np.median(ok))
        if raw is not None:
            raw[n] = ok
    return out


def flush(*urls: str) -> None:
    """SGLang's /flush_cache on each server (it refuses while requests finish: retried)."""
    for url in urls:
        for _ in range(50):
            if httpx.post(url + "/flush_cache", timeout=30).status_code < 300:
                break
            time.sleep(0.1)


def wait_quiet(limit: float, max_wait_s: float, waits: list, stage: str) -> None:
    """Wait (up to `max_wait_s`) until the 1-minute load average is below `limit` (0: never
    wait): other sessions' jobs on this shared box time-slice our servers, which no model of
    SGLang's scheduler predicts. Each wait is recorded."""
    if limit <= 0:
        return
    t0 = time.time()
    while loadavg()[0] >= limit and time.time() - t0 < max_wait_s:
        time.sleep(10)
    waits.append({"stage": stage, "waited_s": round(time.time() - t0), "load": loadavg()})


def transfer_totals(url: str) -> tuple[float, float]:
    """(sum ms, count) of the server's sglang:kv_transfer_latency_ms histogram (a prefill
    server started with --enable-metrics); (0, 0) when it reports none."""
    return parse_transfer_totals(httpx.get(url + "/metrics", timeout=30).text)


def parse_transfer_totals(text: str) -> tuple[float, float]:
    total = count = 0.0
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name == "sglang:kv_transfer_latency_ms_sum":
            total += float(line.rsplit(" ", 1)[1])
        elif name == "sglang:kv_transfer_latency_ms_count":
            count += float(line.rsplit(" ", 1)[1])
    return total, count


def lone_through_pd(cfg, tokens, urls, raw) -> tuple[dict[int, float], list[tuple[int, float]]]:
    """Lone TTFT medians through the router and, per length, the prefill server's mean
    transfer latency over those requests (s)."""
    ttft, transfer = {}, []
    for n in LONE_LENS:
        flush(*urls)
        before = transfer_totals(urls[0])
        ttft |= lone_ttfts(cfg, tokens, [n], LONE_REPEATS, raw)
        after = transfer_totals(urls[0])
        if after[1] > before[1]:
            transfer.append((n, (after[0] - before[0]) / (after[1] - before[1]) / 1e3))
    return ttft, transfer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sglang_mx.plan.validate_pd_cpu")
    ap.add_argument("--num-requests", type=int, default=40, help="requests per sweep point")
    ap.add_argument("--output-len", type=int, default=16, help="output tokens per request")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--quiet-load",
        type=float,
        default=0.0,
        help="before each stage and sweep rate wait for a 1-min load average below this (0: off)",
    )
    ap.add_argument("--quiet-wait-s", type=float, default=900.0, help="longest wait per stage")
    args = ap.parse_args(argv)
    args.waits = []
    from sglang_mx.seam.cpu_binding import BIND_ENV
    from sglang_mx.testing.server import default_serve_args, start_server

    t_start = time.time()
    model_dir, serve_args = default_serve_args()
    serve_args = [*serve_args, "--enable-metrics"]  # the prefill side's transfer latency
    tokens = SegmentTokens(load_tokenizer(model_dir))
    wait_quiet(args.quiet_load, args.quiet_wait_s, args.waits, "calibration")
    load = {"calibration_start": loadavg()}
    plain = start_server(model_dir, serve_args, env={BIND_ENV: "0"})
    try:
        cfg = RunConfig(base_url=plain.base_url, progress=False, warmup=1)
        plain_info = scheduler_config(plain.base_url)[1]
        calibrate_live(cfg, tokens)  # warm pass, discarded: every batch shape once
        cal = calibrate_live(cfg, tokens)
        # as text, the way the PD router takes prompts (it refuses token ids)
        plain_raw: dict[int, list[float]] = {}
        text_cfg = replace(cfg, send_ids=False)
        plain_lone = lone_ttfts(text_cfg, tokens, LONE_LENS, LONE_REPEATS, plain_raw)
    finally:
        plain.stop()
    load["calibration_end"] = loadavg()
    calibration_wall_s = time.time() - t_start
    print(
        f"calibrated in {calibration_wall_s:.0f} s: {cal.terms}; plain lone TTFT {plain_lone}",
        file=sys.stderr,
    )
    first = {
        "plain_server": plain_info,
        "calibration": cal.to_dict(),
        "calibration_wall_s": calibration_wall_s,
        "plain_lone_ttft_s": plain_lone,
        "plain_lone_ttft_all_s": plain_raw,
    }
    return _with_pd(model_dir, serve_args, tokens, cal, first, load, args, t_start)


def _with_pd(model_dir, serve_args, tokens, cal, first, load, args, t_start) -> int:
    from sglang_mx.provider.launch import pd_router_process
    from sglang_mx.testing.pd import start_pd_sides
    from sglang_mx.testing.server import free_port

    sides = start_pd_sides(model_dir, serve_args)
    try:
        sides.wait_serving()
        p_url, d_url = sides.prefill.base_url, sides.decode.base_url
        # its own metrics port: another router on the box (a test) holds the default one
        extra = ("--prometheus-port", str(free_port()))
        with pd_router_process([(p_url, sides.bootstrap_port)], [d_url], extra) as router:
            model_id = httpx.get(p_url + "/v1/models", timeout=30).json()["data"][0]["id"]
            cfg = RunConfig(
                base_url=router,
                model=model_id,
                send_ids=False,  # sglang-router's completions take text, not token ids
                progress=False,
                warmup=1,
                flush=False,
                scrape_metrics=False,
                limits=fetch_limits(p_url),
            )
            return _validate(
                cfg, (p_url, d_url), model_dir, tokens, cal, first, load, args, t_start
            )
    finally:
        sides.close()


def _validate(cfg, urls, model_dir, tokens, cal, first, load, args, t_start) -> int:
    (p_sched, p_info), (d_sched, d_info) = (scheduler_config(u) for u in urls)
    lone_ttfts(cfg, tokens, LONE_LENS, 1)  # warm pass through PD, discarded
    wait_quiet(args.quiet_load, args.quiet_wait_s, args.waits, "handoff")
    load["handoff_start"] = loadavg()
    pd_raw: dict[int, list[float]] = {}
    pd_lone, transfer = lone_through_pd(cfg, tokens, urls, pd_raw)
    load["handoff_end"] = loadavg()
    handoff = fit_handoff(
        handoff_samples(pd_lone, first["plain_lone_ttft_s"], cal.cost),
        kv_bytes_per_token(model_dir, p_info),
        transfer,
    )
    print(
        f"handoff: {handoff.latency_s * 1e3:.1f} ms + {handoff.per_token_s * 1e6:.2f} us/token; "
        f"serial {handoff.serial_latency_s * 1e3:.1f} ms + "
        f"{handoff.serial_per_token_s * 1e6:.2f} us/token; PD lone {pd_lone}, transfer {transfer}",
        file=sys.stderr,
    )
    spec = workload(args.num_requests, args.output_len)
    sides = (p_sched, d_sched)
    slo_s, knee = predicted_knee(spec, sides, cal, handoff)
    rates = [round(knee * f, 3) for f in RATE_FRACTIONS]
    predicted = predict(spec, rates, sides, cal, handoff)
    config = {
        "prefill": p_info,
        "decode": d_info,
        "plain": first["plain_server"],
        "scheduler_model": {"prefill": p_sched.to_dict(), "decode": d_sched.to_dict()},
    }
    result = {
        "stamp": stamp(None, config),
        "what": "planner prediction (prefill + decode engines, calibrated step cost, fitted "
        "handoff) vs a measured `sglang-mx bench` rate sweep through sglang-router's PD mode "
        "in front of one prefill and one decode SGLang 0.5.23 server (default tiny GLM-5, "
        "Mooncake over TCP on loopback, one core each)",
        "box": BOX_NOTE,
        "command": "python -m sglang_mx.plan.validate_pd_cpu " + " ".join(sys.argv[1:]),
        "workload": spec.to_dict(),
        **first,
        "pd_lone_ttft_s": pd_lone,
        "pd_lone_ttft_all_s": pd_raw,
        "handoff": handoff.to_dict(),
        "rates": rates,
        "rate_fractions_of_predicted_knee": list(RATE_FRACTIONS),
        "predicted": predicted,
        "slo_ttft_p95_s": slo_s,
        "load_average": load,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str))  # prediction frozen first
    load["sweep_start"] = loadavg()
    t1 = time.time()
    measured = []
    for rate, point in zip(rates, sweep_specs(spec, "rate", rates), strict=True):
        wait_quiet(args.quiet_load, args.quiet_wait_s, args.waits, f"rate {rate}")
        load[f"rate {rate} start"] = loadavg()
        flush(*urls)
        trace = generate(point)
        slo = Slo(ttft_p95_s=slo_s, ttft_s=slo_s)
        summary = run_trace(trace, materialize(trace, tokens), cfg, tokens, slo).summary
        measured.append({"x": rate, "summary": summary})
        print(
            f"rate {rate}: TTFT p50 {summary['ttft_s']['p50']:.3f} s p95 "
            f"{summary['ttft_s']['p95']:.3f} s, load {loadavg()}",
            file=sys.stderr,
        )
    load["sweep_end"] = loadavg()
    result.update(
        {
            "measured": measured,
            "sweep_wall_s": time.time() - t1,
            "wall_s": time.time() - t_start,
            "load_average": load,
            "quiet_waits": args.waits,
            "comparison": compare(predicted, measured, slo_s),
        }
    )
    args.out.write_text(json.dumps(result, indent=1, default=str))
    plot(result, args.out.with_suffix(".png"), "PD 1 prefill + 1 decode (1 core each)")
    c = result["comparison"]
    print(json.dumps({k: v for k, v in c.items() if k != "rows"}, indent=1))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
