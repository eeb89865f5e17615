"""Cache-aware vs round-robin routing over 2 SGLang workers of the bundled model, on a
shared-prefix workload (G prefix groups x R requests, each a long shared prefix plus a unique
question, shuffled, C in flight). Reports prefix-cache hit rate (cached / prompt tokens from
SGLang's cache report), throughput and latency per policy; workers' caches are flushed between
policies.

    python benchmark/provider_router.py [--groups 8 --per-group 6 --concurrency 4]

Prints a table and writes JSON + PNG under benchmark/results/."""

from __future__ import annotations

import random
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from common import bundled_servers, finish, parser, pct, run_meta, served_model
from sglang_mx.provider.launch import router_process

TOPICS = ("rivers", "mills", "bridges", "ferries", "canals", "locks", "dams", "weirs", "wells",
          "pumps", "gears", "sluices")  # fmt: skip


def workload(groups: int, per_group: int, prefix_words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    prompts = []
    for g in range(groups):
        topic = TOPICS[g % len(TOPICS)]
        words = [f"{topic}{rng.randrange(1000)}" for _ in range(prefix_words)]
        prefix = f"Document {g} about {topic}: " + " ".join(words)
        prompts += [f"{prefix}\nQuestion {uuid.uuid4().hex[:8]}: summarize." for _ in
                    range(per_group)]  # fmt: skip
    rng.shuffle(prompts)
    return prompts


def run_policy(router: str, model: str, prompts: list[str], concurrency: int,
               max_tokens: int) -> dict[str, Any]:  # fmt: skip
    def one(prompt: str) -> tuple[float, dict]:
        t0 = time.perf_counter()
        r = httpx.post(router + "/v1/completions", timeout=300, json={
            "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True})  # fmt: skip
        if r.status_code != 200:
            raise RuntimeError(f"router answered {r.status_code}: {r.text[:300]}")
        return time.perf_counter() - t0, r.json()["usage"]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, prompts))
    wall = time.perf_counter() - t0
    lat = [r[0] for r in results]
    prompt_toks = sum(r[1]["prompt_tokens"] for r in results)
    cached = sum((r[1].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                 for r in results)  # fmt: skip
    out_toks = sum(r[1]["completion_tokens"] for r in results)
    return {"requests": len(prompts), "wall_s": wall, "req_per_s": len(prompts) / wall,
            "prompt_tok_per_s": prompt_toks / wall, "output_tok_per_s": out_toks / wall,
            "hit_rate": cached / prompt_toks, "p50_s": pct(lat, 50), "p99_s": pct(lat, 99),
            "mean_s": statistics.mean(lat)}  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["policies"]
    names = [r["policy"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
    for ax, key, label in zip(axes, ("hit_rate", "req_per_s", "p50_s"),
                              ("prefix-cache hit rate", "requests/s", "p50 latency (s)"),
                              strict=True):  # fmt: skip
        ax.bar(names, [r[key] for r in rows], color=["tab:green", "tab:gray"])
        ax.set_title(label, fontsize=9)
    fig.suptitle(f"smg, 2 workers, {result['meta']['hardware']}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


# The printed table's columns: (header, the policy row's key, its format).
COLUMNS = (("policy", "policy", "<14"), ("hit rate", "hit_rate", ">10.3f"),
           ("req/s", "req_per_s", ">8.2f"), ("prompt tok/s", "prompt_tok_per_s", ">14.1f"),
           ("p50 s", "p50_s", ">8.2f"), ("p99 s", "p99_s", ">8.2f"))  # fmt: skip


def table(result: dict[str, Any]) -> None:
    """One line per routing policy under a header, in COLUMNS' widths."""
    print("".join(f"{head:{fmt.split('.')[0]}}" for head, _, fmt in COLUMNS))
    for r in result["policies"]:
        print("".join(f"{r[key]:{fmt}}" for _, key, fmt in COLUMNS))


def main() -> int:
    ap = parser(__doc__, "provider_router.json", groups=8, per_group=6, prefix_words=300,
                concurrency=4, max_tokens=8, seed=0)  # fmt: skip
    ap.add_argument("--workers", nargs="*", help="running workers; default: start 2")
    args = ap.parse_args()
    with ExitStack() as stack:
        workers = args.workers or bundled_servers(stack, 2)
        model = served_model(workers[0])
        prompts = workload(args.groups, args.per_group, args.prefix_words, args.seed)
        rows = []
        for policy in ("cache_aware", "round_robin"):
            for w in workers:
                httpx.post(w + "/flush_cache", timeout=60)
            with router_process(workers, policy) as router:
                row = run_policy(router, model, prompts, args.concurrency, args.max_tokens)
            rows.append({"policy": policy, **row})
    return finish({"meta": run_meta(model, args), "policies": rows}, args.out, table, plot)


if __name__ == "__main__":
    raise SystemExit(main())
