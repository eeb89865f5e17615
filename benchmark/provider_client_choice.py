"""Which HTTP client the provider should use for its upstream (issue 43, item 9): the provider's
own `h1.H1Transport` under httpx (what `provider/upstream.py` runs), httpx's default transport,
and aiohttp's client, each making the provider's two calls against benchmark/null_upstream.py (a
keep-alive server answering at once: what is measured is the client's own work):

- unary: POST a chat completion, read the whole JSON body, parse it;
- stream: POST with "stream": true, read a 32-event SSE stream line by line to the end.

Each client runs `--calls` sequential calls per kind after `--warmup`, in one asyncio loop on
uvloop (as the provider serves), alternating clients in rounds so drift on a shared box falls on
all alike. Reported per call: CPU microseconds of this process (time.process_time: the client's
cost, which is what the provider's 2 ms added-latency budget pays for) and wall p50.

    .venv/bin/python benchmark/provider_client_choice.py [--calls 2000] [--rounds 5]

Writes benchmark/results/provider-client-choice.json with the box, versions and date."""

from __future__ import annotations

import argparse
import json
import platform
import socket
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import aiohttp
import httpx
import uvloop

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmark" / "results" / "provider-client-choice.json"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
STREAM_BODY = {**BODY, "stream": True, "max_tokens": 32}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _data_lines(resp: httpx.Response) -> int:
    """SSE `data:` lines of an httpx response, read line by line to its end."""
    n = 0
    async for line in resp.aiter_lines():
        n += line.startswith("data:")
    return n


class H1Client:
    """What the provider runs: provider.upstream.Upstream (httpx API over h1.H1Transport)."""

    name = "h1 (ours, httpx API over httptools)"

    def __init__(self, url: str) -> None:
        from sglang_mx.provider.upstream import Upstream

        self.up = Upstream(url, 5.0, 60.0)

    async def unary(self) -> None:
        await self.up.post_json("/v1/chat/completions", BODY)

    async def stream(self) -> int:
        async with self.up.stream("/v1/chat/completions", STREAM_BODY) as resp:
            return await _data_lines(resp)

    async def close(self) -> None:
        await self.up.close()


class HttpxClient:
    name = "httpx default transport (httpcore + h11)"

    def __init__(self, url: str) -> None:
        self.client = httpx.AsyncClient(base_url=url, trust_env=False, timeout=60.0)

    async def unary(self) -> None:
        r = await self.client.post("/v1/chat/completions", json=BODY)
        r.json()

    async def stream(self) -> int:
        async with self.client.stream("POST", "/v1/chat/completions", json=STREAM_BODY) as r:
            return await _data_lines(r)

    async def close(self) -> None:
        await self.client.aclose()


class AiohttpClient:
    name = "aiohttp ClientSession"

    def __init__(self, url: str) -> None:
        self.url = url + "/v1/chat/completions"
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=60), trust_env=False
        )

    async def unary(self) -> None:
        async with self.session.post(self.url, json=BODY) as r:
            await r.json(content_type=None)

    async def stream(self) -> int:
        n = 0
        async with self.session.post(self.url, json=STREAM_BODY) as r:
            async for line in r.content:
                n += line.startswith(b"data:")
        return n

    async def close(self) -> None:
        await self.session.close()


async def _time(fn, calls: int) -> tuple[float, float]:
    """(CPU us per call, wall p50 us) over `calls` sequential calls."""
    walls = []
    cpu0 = time.process_time()
    for _ in range(calls):
        t0 = time.perf_counter()
        await fn()
        walls.append(time.perf_counter() - t0)
    return (time.process_time() - cpu0) / calls * 1e6, statistics.median(walls) * 1e6


async def measure(url: str, calls: int, rounds: int, warmup: int) -> dict:
    clients = [H1Client(url), HttpxClient(url), AiohttpClient(url)]
    out = {c.name: {"unary": [], "stream": []} for c in clients}
    for c in clients:
        for _ in range(warmup):
            await c.unary()
        assert await c.stream() == 33, "the null upstream's stream: 32 tokens + usage"
    for _ in range(rounds):
        for c in clients:
            out[c.name]["unary"].append(await _time(c.unary, calls))
            out[c.name]["stream"].append(await _time(c.stream, max(1, calls // 8)))
    for c in clients:
        await c.close()
    return {
        name: {
            kind: {
                "cpu_us_per_call_median": statistics.median(r[0] for r in runs),
                "cpu_us_per_call_runs": [round(r[0], 1) for r in runs],
                "wall_us_p50_median": statistics.median(r[1] for r in runs),
            }
            for kind, runs in kinds.items()
        }
        for name, kinds in out.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000, help="unary calls per client per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=200)
    args = ap.parse_args()
    port = _free_port()
    null = ROOT / "benchmark" / "null_upstream.py"
    proc = subprocess.Popen([sys.executable, str(null), str(port), "--stream-max-tokens"])
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(url + "/v1/models", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        result = uvloop.run(measure(url, args.calls, args.rounds, args.warmup))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    record = {
        "what": "per-call client cost against benchmark/null_upstream.py (not SGLang)",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "box": f"{platform.machine()} {platform.processor() or ''} {socket.gethostname()}",
        "cpu": _cpu_model(),
        "load_average_1_5_15": [round(x, 2) for x in __import__("os").getloadavg()],
        "versions": {
            "python": platform.python_version(),
            "httpx": httpx.__version__,
            "aiohttp": aiohttp.__version__,
            "uvloop": uvloop.__version__,
        },
        "config": {
            "calls": args.calls,
            "rounds": args.rounds,
            "warmup": args.warmup,
            "stream_events": 32,
        },  # fmt: skip
        "results": result,
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for name, kinds in result.items():
        u, s = kinds["unary"], kinds["stream"]
        print(f"{name:42s} unary {u['cpu_us_per_call_median']:7.1f} us CPU "
              f"(wall p50 {u['wall_us_p50_median']:7.1f} us); 32-event stream "
              f"{s['cpu_us_per_call_median']:7.1f} us CPU")  # fmt: skip
    print(f"wrote {OUT}")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f", {_cores()} cores"
    except OSError:
        pass
    return platform.processor()


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
