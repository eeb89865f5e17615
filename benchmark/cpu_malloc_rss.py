"""A CPU server's resident memory over one long decode, under each allocator `sglang-mx serve`
can give it (python/sglang_mx/seam/cpu_malloc.py): glibc as it is, glibc with a fixed 128 KiB
mmap threshold, and jemalloc (the default where installed).

    python benchmark/cpu_malloc_rss.py --out docs/results/cpu-malloc-decode-rss.json

Each: `sglang-mx serve` of the default bundled model with FP8 KV and the same shape flags as
benchmark/unscaled_20k.py, one streamed /v1/completions request (a ~2k-token text prompt,
ignore_eos, greedy), the scheduler processes' summed RSS sampled every 5 s against the tokens
streamed so far. The decode's tok/s is printed beside it: the allocators do not cost the same."""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import httpx
import psutil
from sglang_mx.measure.stamp import stamp
from unscaled_20k import REPO, SHAPE_ARGS, Servers

ALLOCATORS = {
    "glibc": {"SGLANG_MX_MALLOC": "glibc"},
    "glibc-mmap-threshold": {"SGLANG_MX_MALLOC": "glibc", "MALLOC_MMAP_THRESHOLD_": "131072"},
    "jemalloc": {"SGLANG_MX_MALLOC": "jemalloc"},
}


def measure(work: Path, name: str, env: dict, prompt_tokens: int, new_tokens: int) -> dict:
    servers = Servers(work / name)
    (work / name).mkdir(parents=True, exist_ok=True)
    samples, count = [], {"n": 0}
    try:
        url = servers.start("server", 30611, list(SHAPE_ARGS), env)
        servers.wait(url)
        root = psutil.Process(servers.procs[0][1].pid)
        scheds = [c for c in root.children(recursive=True) if "scheduler" in c.name()]
        stop, t0 = threading.Event(), time.monotonic()

        def sample() -> None:
            while not stop.wait(5.0):
                rss = sum(s.memory_info().rss for s in scheds) / 2**30
                samples.append({"t_s": round(time.monotonic() - t0, 1), "tokens": count["n"],
                                "scheduler_rss_gib": round(rss, 3)})  # fmt: skip
                print(name, samples[-1], flush=True)

        threading.Thread(target=sample, daemon=True).start()
        text = "def f(x):\n    return x + 1\n" * (prompt_tokens // 12)
        body = {"model": "default", "prompt": text, "max_tokens": new_tokens, "stream": True,
                "ignore_eos": True, "temperature": 0}  # fmt: skip
        first = None
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=3600) as r:
            for line in r.iter_lines():
                if line.startswith("data:") and '"choices"' in line:
                    count["n"] += 1
                    first = first or time.monotonic()
        stop.set()
        decode_s = time.monotonic() - first
    finally:
        servers.stop()
    return {"env": env, "tokens": count["n"], "decode_tok_s": count["n"] / decode_s,
            "rss_first_gib": samples[0]["scheduler_rss_gib"] if samples else None,
            "rss_last_gib": samples[-1]["scheduler_rss_gib"] if samples else None,
            "rss_peak_gib": max((s["scheduler_rss_gib"] for s in samples), default=None),
            "samples": samples}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs/results/cpu-malloc-decode-rss.json")
    ap.add_argument("--work", type=Path, default=REPO / "build/cpu-malloc")
    ap.add_argument("--prompt-tokens", type=int, default=2000)
    ap.add_argument("--new-tokens", type=int, default=1500)
    args = ap.parse_args()
    runs = {}
    for name, env in ALLOCATORS.items():
        runs[name] = measure(args.work, name, env, args.prompt_tokens, args.new_tokens)
        r = runs[name]
        print(f"{name}: scheduler RSS {r['rss_first_gib']} -> {r['rss_last_gib']} GiB (peak "
              f"{r['rss_peak_gib']}), {r['tokens']} tokens at {r['decode_tok_s']:.1f} tok/s",
              flush=True)  # fmt: skip
    config = {"prompt": f"~{args.prompt_tokens} tokens of text", "new_tokens": args.new_tokens,
              "server_args": SHAPE_ARGS, "model": "tiny-glm5-quark (bundled default)"}  # fmt: skip
    record = {"benchmark": "cpu_malloc_rss", "stamp": stamp(config=config), "runs": runs}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
