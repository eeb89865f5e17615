"""Provider overhead on loopback: added latency of `sglang-mx provider` over direct SGLang
(p50/p99 per request, interleaved so drift hits both alike, and the provider's CPU time per
request), the same against a null upstream (the provider's own work, no model contending for the
cores), streamed chunks/s through each, and the cost of per-key prefix-cache isolation (hit rate
and latency with it on and off).

    python benchmark/provider_overhead.py                 # starts the bundled MXFP4 model
    python benchmark/provider_overhead.py --upstream URL  # an SGLang server already running

Prints a table and writes JSON + PNG under benchmark/results/."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from common import bundled_servers, finish, parser, pct, run_meta, served_model
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.launch import provider_process

MODEL_ID = "bench/tiny"


def write_pricing(path: Path, upstream_model: str) -> Path:
    entry = {"id": MODEL_ID, "upstream_model": upstream_model, "context_length": 4096,
             "max_completion_tokens": 1024, "quantization": "mxfp4",
             "usd_per_m": {"prompt": 0.5, "completion": 2.0, "input_cache_read": 0.05}}  # fmt: skip
    path.write_text(json.dumps(entry))
    return path


def timed_post(client: httpx.Client, url: str, body: dict, headers: dict) -> float:
    t0 = time.perf_counter()
    r = client.post(url, json=body, headers=headers)
    dt_s = time.perf_counter() - t0
    if r.status_code != 200:
        raise RuntimeError(f"{url}: HTTP {r.status_code}: {r.text[:500]}")
    return dt_s


def cpu_seconds(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def latency(
    upstream: str, provider: str, key: str, model: str, n: int, provider_pid: int
) -> dict[str, Any]:
    """Interleaved direct/provider 1-token completions of one (cached) prompt."""
    h = {"Authorization": f"Bearer {key}"}
    direct_body = {"model": model, "prompt": "The quick brown fox", "max_tokens": 1,
                   "temperature": 0}  # fmt: skip
    prov_body = dict(direct_body, model=MODEL_ID)
    direct, via = [], []
    with httpx.Client(timeout=60) as c:
        for _ in range(5):  # warm both paths (connections, caches)
            timed_post(c, upstream + "/v1/completions", direct_body, {})
            timed_post(c, provider + "/v1/completions", prov_body, h)
        cpu0 = cpu_seconds(provider_pid)
        for _ in range(n):
            direct.append(timed_post(c, upstream + "/v1/completions", direct_body, {}))
            via.append(timed_post(c, provider + "/v1/completions", prov_body, h))
        cpu_s = cpu_seconds(provider_pid) - cpu0
    row: dict[str, Any] = {"requests": n, "provider_cpu_us_per_request": 1e6 * cpu_s / n}
    for name, xs in (("direct", direct), ("provider", via)):
        row[f"{name}_p50_ms"] = 1e3 * pct(xs, 50)
        row[f"{name}_p99_ms"] = 1e3 * pct(xs, 99)
    diffs = [b - a for a, b in zip(direct, via, strict=True)]
    row["added_p50_ms"] = 1e3 * statistics.median(diffs)
    row["added_p99_ms"] = row["provider_p99_ms"] - row["direct_p99_ms"]
    return row


def short_streams(
    upstream: str, provider: str, key: str, model: str, n: int, provider_pid: int
) -> dict[str, Any]:
    """Interleaved direct/provider 4-token chat streams (same stream_options both ways): time to
    the first content chunk and to the end of the stream, and the provider's CPU per stream."""
    h = {"Authorization": f"Bearer {key}"}
    prov_body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Count slowly."}],
                 "max_tokens": 4, "stream": True, "temperature": 0}  # fmt: skip
    # The provider adds these upstream; direct requests carry them too, so SGLang's work matches.
    usage = {"include_usage": True, "continuous_usage_stats": True}
    direct_body = dict(prov_body, model=model, stream_options=usage)

    def one(c: httpx.Client, url: str, body: dict, headers: dict) -> tuple[float, float]:
        t0 = time.perf_counter()
        first = None
        with c.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if first is None and line.startswith("data:") and line != "data: [DONE]":
                    if json.loads(line[5:]).get("choices"):
                        first = time.perf_counter() - t0
        return first or float("nan"), time.perf_counter() - t0

    direct, via = [], []
    with httpx.Client(timeout=60) as c:
        for _ in range(5):
            one(c, upstream, direct_body, {})
            one(c, provider, prov_body, h)
        cpu0 = cpu_seconds(provider_pid)
        for _ in range(n):
            direct.append(one(c, upstream, direct_body, {}))
            via.append(one(c, provider, prov_body, h))
        cpu_s = cpu_seconds(provider_pid) - cpu0
    row: dict[str, Any] = {"streams": n, "max_tokens": 4,
                           "provider_cpu_us_per_stream": 1e6 * cpu_s / n}  # fmt: skip
    for i, what in enumerate(("ttft", "total")):
        row[f"direct_{what}_p50_ms"] = 1e3 * pct([x[i] for x in direct], 50)
        row[f"provider_{what}_p50_ms"] = 1e3 * pct([x[i] for x in via], 50)
        diffs = [b[i] - a[i] for a, b in zip(direct, via, strict=True)]
        row[f"added_{what}_p50_ms"] = 1e3 * statistics.median(diffs)
    return row


def stream_rate(url: str, body: dict, headers: dict) -> tuple[int, float, float]:
    """(content chunks, seconds from first to last chunk, TTFT seconds)."""
    t0 = time.perf_counter()
    first = last = None
    chunks = 0
    with httpx.stream("POST", url, json=body, headers=headers, timeout=120) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            if json.loads(line[5:]).get("choices"):
                now = time.perf_counter()
                first = first or now
                last = now
                chunks += 1
    return chunks, (last - first) if chunks > 1 else 0.0, (first or t0) - t0


def streaming(upstream: str, provider: str, key: str, model: str, n: int, tokens: int) -> dict:
    h = {"Authorization": f"Bearer {key}"}
    body = {"model": model, "messages": [{"role": "user", "content": "Count slowly."}],
            "max_tokens": tokens, "stream": True, "ignore_eos": True, "temperature": 0}  # fmt: skip
    out: dict[str, Any] = {"requests": n, "max_tokens": tokens}
    rates: dict[str, list[float]] = {"direct": [], "provider": []}
    ttfts: dict[str, list[float]] = {"direct": [], "provider": []}
    for _ in range(n):
        for name, url, b, hh in (
            ("direct", upstream, body, {}),
            ("provider", provider, dict(body, model=MODEL_ID), h),
        ):
            chunks, span, ttft = stream_rate(url + "/v1/chat/completions", b, hh)
            rates[name].append((chunks - 1) / span if span else 0.0)
            ttfts[name].append(ttft)
    for name in rates:
        out[f"{name}_chunks_per_s"] = statistics.median(rates[name])
        out[f"{name}_ttft_ms"] = 1e3 * statistics.median(ttfts[name])
    return out


def null_upstream(stack: ExitStack) -> tuple[str, str]:
    """Start benchmark/null_upstream.py, stopped when `stack` closes; its URL and model id once
    it answers."""
    import subprocess
    import sys

    from sglang_mx.provider.launch import free_port

    port = free_port()
    script = Path(__file__).with_name("null_upstream.py")
    proc = subprocess.Popen([sys.executable, str(script), str(port)])
    stack.callback(lambda: (proc.kill(), proc.wait(timeout=10)))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            return url, httpx.get(url + "/v1/models", timeout=1).json()["data"][0]["id"]
        except httpx.HTTPError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.1)


def null_upstream_latency(tmp: Path, n: int, n_streams: int) -> dict[str, Any]:
    """The latency and short-stream rows against benchmark/null_upstream.py instead of SGLang."""
    with ExitStack() as stack:
        url, model = null_upstream(stack)
        pricing = write_pricing(tmp / "null-pricing.json", model)
        db = tmp / "null.sqlite"
        _, key = KeyStore(db).create("bench")
        with provider_process(url, pricing, db, "--default-rpm", "100000000") as prov:
            out = latency(url, prov.url, key, model, n, prov.proc.pid)
            out["short_streams"] = short_streams(url, prov.url, key, model, n_streams,
                                                 prov.proc.pid)  # fmt: skip
            return out


def isolation_cost(upstream: str, pricing: Path, tmp: Path, n: int) -> list[dict[str, Any]]:
    """Two tenants sharing one long system prompt: hit rate and latency, isolation off vs on."""
    system = "You are a helpful assistant for the mill. " * 40
    rows = []
    for mode in ("off", "on"):
        db = tmp / f"iso-{mode}.sqlite"
        store = KeyStore(db)
        keys = [store.create(f"tenant-{i}")[1] for i in range(2)]
        httpx.post(upstream + "/flush_cache", timeout=30)
        prompt_toks = cached = 0
        lat = []
        with provider_process(upstream, pricing, db, "--isolation", mode,
                              "--default-rpm", "100000") as prov:  # fmt: skip
            for i in range(n):
                body = {"model": MODEL_ID, "max_tokens": 1, "temperature": 0, "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"Question {uuid.uuid4().hex[:6]}?"}]}  # fmt: skip
                t0 = time.perf_counter()
                r = httpx.post(prov.url + "/v1/chat/completions", json=body, timeout=60,
                               headers={"Authorization": f"Bearer {keys[i % 2]}"})  # fmt: skip
                lat.append(time.perf_counter() - t0)
                r.raise_for_status()
                u = r.json()["usage"]
                prompt_toks += u["prompt_tokens"]
                cached += u["prompt_tokens_details"]["cached_tokens"]
        rows.append(
            {
                "isolation": mode,
                "requests": n,
                "hit_rate": cached / prompt_toks,
                "p50_ms": 1e3 * pct(lat, 50),
                "mean_ms": 1e3 * statistics.mean(lat),
            }
        )
    return rows


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lat = result["latency"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    labels = ["p50", "p99"]
    for i, name in enumerate(("direct", "provider")):
        vals = [lat[f"{name}_p50_ms"], lat[f"{name}_p99_ms"]]
        axes[0].bar([x + 0.4 * i for x in range(2)], vals, width=0.4, label=name)
    axes[0].set_xticks([0.2, 1.2], labels)
    axes[0].set_ylabel("ms per 1-token request")
    axes[0].legend()
    st = result["streaming"]
    axes[1].bar(["direct", "provider"], [st["direct_chunks_per_s"], st["provider_chunks_per_s"]])
    axes[1].set_ylabel("stream chunks/s")
    fig.suptitle(f"provider overhead, {result['meta']['hardware']}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def table(result: dict[str, Any]) -> None:
    lat, st = result["latency"], result["streaming"]
    print(f"{'':24}{'direct':>10}{'provider':>10}{'added':>10}")
    print(
        f"{'p50 ms (1-token req)':24}{lat['direct_p50_ms']:10.2f}{lat['provider_p50_ms']:10.2f}"
        f"{lat['added_p50_ms']:10.2f}"
    )
    print(
        f"{'p99 ms (1-token req)':24}{lat['direct_p99_ms']:10.2f}{lat['provider_p99_ms']:10.2f}"
        f"{lat['added_p99_ms']:10.2f}"
    )
    print(
        f"{'stream chunks/s':24}{st['direct_chunks_per_s']:10.1f}"
        f"{st['provider_chunks_per_s']:10.1f}"
    )
    print(f"{'provider CPU us/request':24}{'':10}{lat['provider_cpu_us_per_request']:10.0f}")
    nul = result["null_upstream"]
    print(
        f"{'null upstream p50 ms':24}{nul['direct_p50_ms']:10.2f}{nul['provider_p50_ms']:10.2f}"
        f"{nul['added_p50_ms']:10.2f}   (CPU {nul['provider_cpu_us_per_request']:.0f} us/req)"
    )
    for name, ss in (("", result["short_streams"]), ("null ", nul["short_streams"])):
        print(
            f"{name + '4-tok stream TTFT ms':24}{ss['direct_ttft_p50_ms']:10.2f}"
            f"{ss['provider_ttft_p50_ms']:10.2f}{ss['added_ttft_p50_ms']:10.2f}"
            f"   (whole stream +{ss['added_total_p50_ms']:.2f} ms, "
            f"CPU {ss['provider_cpu_us_per_stream']:.0f} us/stream)"
        )
    print(f"{'stream TTFT ms':24}{st['direct_ttft_ms']:10.1f}{st['provider_ttft_ms']:10.1f}")
    for row in result["isolation"]:
        print(
            f"isolation {row['isolation']:3}: hit rate {row['hit_rate']:.3f}, "
            f"p50 {row['p50_ms']:.1f} ms"
        )


def main() -> int:
    ap = parser(__doc__, "provider_overhead.json", requests=300, null_requests=2000,
                short_streams=100, streams=5, stream_tokens=128, isolation_requests=12)  # fmt: skip
    ap.add_argument("--upstream", help="running SGLang server; default: start the bundled model")
    args = ap.parse_args()
    with ExitStack() as stack:
        upstream = args.upstream or bundled_servers(stack, 1)[0]
        model = served_model(upstream)
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        pricing = write_pricing(tmp / "pricing.json", model)
        db = tmp / "bench.sqlite"
        _, key = KeyStore(db).create("bench")
        prov = stack.enter_context(provider_process(upstream, pricing, db,
                                                    "--default-rpm", "1000000"))  # fmt: skip
        result = {
            "meta": run_meta(model, args),
            "latency": latency(upstream, prov.url, key, model, args.requests, prov.proc.pid),
            "short_streams": short_streams(
                upstream, prov.url, key, model, args.short_streams, prov.proc.pid
            ),
            "null_upstream": null_upstream_latency(tmp, args.null_requests, 5 * args.short_streams),
            "streaming": streaming(
                upstream, prov.url, key, model, args.streams, args.stream_tokens
            ),  # fmt: skip
            "isolation": isolation_cost(upstream, pricing, tmp, args.isolation_requests),
        }
    return finish(result, args.out, table, plot)


if __name__ == "__main__":
    raise SystemExit(main())
