"""Cache-aware vs round-robin routing in smg (SGLang Model Gateway) vs one worker, on the
production-20k-1k-60 workload scaled to this box: `sglang-mx bench run` through `smg launch` in
front of N SGLang workers of the bundled MXFP4 model (--enable-cache-report), each policy on
fresh caches (the runner flushes them through the gateway's /flush_cache, which fans out to every
worker, then primes each shared prefix once). Per run: the hit rate measured against the one an
ideal single cache would have reached with the same send times (`reachable`, bench/load/reach.py),
TTFT and throughput. Optionally the same through the provider (provider -> smg cache_aware).

    python benchmark/smg_cache_routing.py --workers 2 4 --scale 0.05 --num-requests 48

Writes benchmark/results/smg_cache_routing.json (or -o) and prints a table."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from common import RESULTS, bundled_servers, load_avg, run_meta, served_model
from sglang_mx.provider.launch import provider_process, router_process

# production-20k-1k-60: 20,000 tokens in, 1,000 out, 60% of prompt tokens cached, 8 prefixes.
IN, OUT = 20_000, 1_000


def bench(url: str, tokenizer: str, args: argparse.Namespace, out: Path, *extra: str) -> dict:
    """One `sglang-mx bench run` of the scaled workload against `url`; its summary."""
    cmd = [sys.executable, "-m", "sglang_mx.cli.main", "bench", "run",
           "--workload", "production-20k-1k-60",
           "--input-len", str(round(IN * args.scale)), "--output-len", str(round(OUT * args.scale)),
           "--num-requests", str(args.num_requests), "--arrival", "concurrency",
           "--concurrency", str(args.concurrency), "--warmup", "0", "--no-progress",
           # smg's OpenAI routes take a prompt as text, not token ids (HTTP 400)
           "--send-text", "--url", url, "--tokenizer", tokenizer, "-o", str(out),
           *(["--prefix-groups", str(args.prefix_groups)] if args.prefix_groups else []),
           *extra]  # fmt: skip
    t0 = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if run.returncode not in (0, 1):  # 1: some requests failed, recorded in the summary
        raise RuntimeError(f"bench run failed ({run.returncode}): {run.stderr[-2000:]}")
    result = json.loads((out / "result.json").read_text())
    s = result["sweep"]["points"][0]["summary"]
    reachable = s.get("reachable_cached_tokens") or s["expected_cached_tokens"]
    return {
        "completed": s["completed"], "errors": s["errors"], "first_error": s["first_error"],
        "prompt_tokens": s["input_tokens"], "cached_tokens": s["cached_tokens"],
        "reachable_cached_tokens": reachable, "designed_cached_tokens": s["expected_cached_tokens"],
        "hit_rate": round(s["hit_rate"], 4),
        "reachable_hit_rate": round(reachable / s["input_tokens"], 4),
        "of_reachable": round(s["cached_tokens"] / reachable, 4) if reachable else None,
        "ttft_p50_s": round(s["ttft_s"]["p50"], 3), "ttft_p99_s": round(s["ttft_s"]["p99"], 3),
        "req_s": round(s["request_throughput"], 4), "total_tok_s": round(s["total_tok_s"], 1),
        "duration_s": round(s["duration_s"], 1), "wall_s": round(time.monotonic() - t0, 1),
        "load_avg_1m_end": round(load_avg(), 2),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--scale", type=float, default=0.05, help="of 20k in / 1k out")
    ap.add_argument("--num-requests", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--policies", nargs="+", default=["cache_aware", "round_robin"])
    ap.add_argument("--provider", action="store_true", help="also provider -> smg cache_aware")
    ap.add_argument("--urls", nargs="*", default=[], help="running workers to use first")
    # The workload assigns prefix groups in turn (request i: group i % 8) and primes them in the
    # same order: round-robin over 2 or 4 workers then sends every request to the worker primed
    # with its prefix, as well as cache-aware could (2026-12-06: 0.6 of 0.6 for every policy).
    # A group count prime to the worker counts (7) breaks that lock-step.
    ap.add_argument("--prefix-groups", type=int, help="override the workload's 8 prefix groups")
    ap.add_argument("-o", "--out", type=Path, default=RESULTS / "smg_cache_routing.json")
    args = ap.parse_args()
    from sglang_mx.assets import bundled_model_path

    tokenizer = str(bundled_model_path("mxfp4"))
    tmp = Path(tempfile.mkdtemp(prefix="smg-cache-"))
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        more = max(args.workers) - len(args.urls)
        urls = [*args.urls, *(bundled_servers(stack, more) if more > 0 else [])]
        model = served_model(urls[0])
        runs = [(1, "one worker")] + [(n, p) for n in args.workers for p in args.policies]
        for n, policy in runs:
            tag = f"{n}w-{policy.replace(' ', '-')}"
            with router_process(urls[:n], "cache_aware" if n == 1 else policy) as router:
                row = bench(router, tokenizer, args, tmp / tag)
            rows.append({"workers": n, "policy": policy, "via": "smg", **row})
            print(json.dumps(rows[-1]), flush=True)
        if args.provider:
            from sglang_mx.provider.keys import KeyStore

            n = args.workers[0]
            pricing = tmp / "pricing.json"
            pricing.write_text(json.dumps({"models": [{
                "id": "bench/tiny", "upstream_model": model, "name": "bundled MXFP4 toy",
                "description": "bundled toy MoE", "quantization": "mxfp4",
                "context_length": 8192, "max_completion_tokens": 4096,
                "usd_per_m": {"prompt": 0.5, "completion": 2.0,
                              "input_cache_read": 0.05}}]}))  # fmt: skip
            db = tmp / "provider.sqlite"
            _, key = KeyStore(db).create("bench")
            with router_process(urls[:n], "cache_aware") as router:
                with provider_process(router, pricing, db, "--default-rpm", "100000") as prov:
                    row = bench(prov.url, tokenizer, args, tmp / f"{n}w-provider", "--api-key",
                                key, "--model", "bench/tiny")  # fmt: skip
            rows.append({"workers": n, "policy": "cache_aware", "via": "provider -> smg", **row})
            print(json.dumps(rows[-1]), flush=True)
    meta = run_meta(model, args)
    meta["workload"] = (
        f"production-20k-1k-60 scaled by {args.scale}: "
        f"{round(IN * args.scale)} in / {round(OUT * args.scale)} out, 60% "
        f"designed hit, {args.prefix_groups or 8} prefix groups, {args.num_requests} requests, "
        f"closed loop at concurrency {args.concurrency}, prompts sent as text"
    )
    meta["command"] = "python benchmark/smg_cache_routing.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n")
    print("| workers | policy | via | hit | reachable | of reachable | TTFT p50 s | req/s |")
    for r in rows:
        print(f"| {r['workers']} | {r['policy']} | {r['via']} | {r['hit_rate']} | "
              f"{r['reachable_hit_rate']} | {r['of_reachable']} | {r['ttft_p50_s']} | "
              f"{r['req_s']} |")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
