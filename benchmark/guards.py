"""What the request guards cost and what they prevent, on the bundled model.

1. Guard latency: the plugin's per-request check (`guards.hooks.guard_one_request` on a real
   GenerateReqInput, what the tokenizer manager calls) and the HTTP body guard (ASGI
   middleware around a no-op app), timed in-process: p50/p99 in microseconds.
2. The same generated hostile-request campaign (one seed) against a supervised server without
   the guards (SGLANG_MX_GUARDS=0) and with them: requests tried, worker deaths, distinct
   crash classes, and the supervisor's restart time after each death.
3. Restart after a kill: SIGKILL of the server's process group under the supervisor, time
   until it generates again.

Prints a table and writes JSON (hardware, versions, config, date) to
benchmark/results/guards.json.

    python benchmark/guards.py [--cases 300] [--seed 20261130] [--kills 2]
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import hardware, load_avg, parser  # noqa: E402


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def guard_latency(iters: int) -> dict:
    from types import SimpleNamespace

    from sglang.srt.managers.io_struct import GenerateReqInput
    from sglang_mx.guards.hooks import guard_one_request

    manager = SimpleNamespace(model_config=SimpleNamespace(vocab_size=2048), context_len=8192)
    out = {}
    for n_ids in (16, 512, 4096):
        obj = GenerateReqInput(
            input_ids=list(range(1, n_ids + 1)),
            sampling_params={
                "max_new_tokens": 64,
                "temperature": 0.7,
                "top_k": 40,
                "stop_token_ids": [2, 3],
                "logit_bias": {"5": 1.0},
            },  # fmt: skip
            return_logprob=True,
            top_logprobs_num=5,
        )
        obj.normalize_batch_and_arguments()
        ids = [i % 2048 for i in obj.input_ids]
        times = []
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            guard_one_request(manager, obj, ids)
            times.append((time.perf_counter_ns() - t0) / 1000)
        out[f"tokenizer_check_{n_ids}_ids"] = {"p50_us": _pct(times, 0.5),
                                               "p99_us": _pct(times, 0.99)}  # fmt: skip
    out["http_body_guard"] = asyncio.run(_http_guard_latency(iters))
    return out


async def _http_guard_latency(iters: int) -> dict:
    from sglang_mx.guards.http_app import JsonObjectGuard

    async def app(scope, receive, send):
        await receive()

    guard = JsonObjectGuard(app)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]})
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions"}

    async def receive():
        return {"type": "http.request", "body": body.encode(), "more_body": False}

    async def send(message):
        pass

    times = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        await guard(scope, receive, send)
        times.append((time.perf_counter_ns() - t0) / 1000)
    base = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        await app(scope, receive, send)
        base.append((time.perf_counter_ns() - t0) / 1000)
    return {"p50_us": _pct(times, 0.5) - _pct(base, 0.5), "p99_us": _pct(times, 0.99)}


def campaign(cases: int, seed: int, guards: bool) -> dict:
    import httpx
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.campaign import Campaign
    from sglang_mx_lab.testing.hostile import Target
    from sglang_mx_lab.testing.server import SupervisedServer

    os.environ["SGLANG_MX_GUARDS"] = "1" if guards else "0"
    server = SupervisedServer(bundled_model_path("mxfp4"), ["--enable-cache-report"], {})
    try:
        server.wait_healthy()
        model = httpx.get(server.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
        target = Target(model, 2048, 8192)  # the bundled model (unguarded servers don't say)
        t0 = time.monotonic()
        result = Campaign(server, target, shrink_budget=0).run(cases, seed)
        wall = time.monotonic() - t0
    finally:
        server.close()
        os.environ.pop("SGLANG_MX_GUARDS", None)
    return {
        "guards": guards,
        "requests": result.tried,
        "worker_deaths": result.deaths,
        "crash_classes": sorted(result.classes),
        "failures": len(result.crashes),
        "restart_s": result.restart_s,
        "wall_s": round(wall, 1),
    }


def restart_after_kill(kills: int) -> list[float]:
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.server import SupervisedServer

    server = SupervisedServer(bundled_model_path("mxfp4"), ["--enable-cache-report"], {})
    out = []
    try:
        server.wait_healthy()
        for _ in range(kills):
            os.killpg(server.sup.child.pid, signal.SIGKILL)
            time.sleep(0.5)
            out.append(round(0.5 + server.wait_healthy(), 1))
    finally:
        server.close()
    return out


def main() -> int:
    ap = parser(__doc__, "guards.json", cases=300, seed=20261130, kills=2, iters=20000)
    ap.add_argument("--latency-only", action="store_true",
                    help="re-time the guards only; update that section of --out")  # fmt: skip
    args = ap.parse_args()

    from sglang_mx.machine_info import versions

    latency = guard_latency(args.iters)
    if args.latency_only:
        result = json.loads(args.out.read_text())
        result["guard_latency"] = latency
        result["meta"]["latency_date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        result["meta"]["latency_load_avg_1m"] = load_avg()
        args.out.write_text(json.dumps(result, indent=2))
        for name, v in latency.items():
            print(f"{name:36s} p50 {v['p50_us']:8.1f} us  p99 {v['p99_us']:8.1f} us")
        return 0
    runs = [campaign(args.cases, args.seed, guards) for guards in (False, True)]
    kills = restart_after_kill(args.kills)
    result = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "hardware": hardware(),
            "load_avg_1m": load_avg(),
            "versions": versions(),
            "config": {
                "model": "bundled tiny-glm-moe-mxfp4 (vocab 2048, context 8192)",
                "cases": args.cases,
                "seed": args.seed,
                "latency_iters": args.iters,
                "server": "--enable-cache-report, CPU platform",
            },  # fmt: skip
        },
        "guard_latency": latency,
        "campaigns": runs,
        "restart_after_kill_s": kills,
    }
    print(f"{result['meta']['hardware']}  {result['meta']['date']}")
    print(f"{'guard check':36s} {'p50 us':>8s} {'p99 us':>8s}")
    for name, v in latency.items():
        print(f"{name:36s} {v['p50_us']:8.1f} {v['p99_us']:8.1f}")
    head = f"{'campaign':10s} {'requests':>8s} {'deaths':>7s} {'classes':>8s}"
    print(f"\n{head} {'restart s (median)':>19s}")
    for r in runs:
        med = statistics.median(r["restart_s"]) if r["restart_s"] else float("nan")
        print(f"{'guards on' if r['guards'] else 'guards off':10s} {r['requests']:8d} "
              f"{r['worker_deaths']:7d} {len(r['crash_classes']):8d} {med:19.1f}")  # fmt: skip
        for c in r["crash_classes"]:
            print(f"    {c}")
    print(f"\nrestart after SIGKILL of the server (s): {kills}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
