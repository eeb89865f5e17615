"""Start-up time and decode speed of the bundled model served by SGLang on this machine.

    python benchmark/serve_cpu.py --out benchmark/results

For each bundled checkpoint (mxfp4, bf16): time from process start to the first served request,
then single-stream decode tokens/s (streamed, after the first streamed chunk) and the aggregate
tokens/s of 4 concurrent streams (each the median of --repeats runs). Writes serve_cpu.json
with hardware, versions, date and the load average (the box may be shared).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import statistics
import time
from pathlib import Path

import httpx
from sglang_mx.assets import bundled_model_path
from sglang_mx.measure.stamp import stamp
from sglang_mx_lab.testing.server import start_server

PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n    "


def stream_decode(url: str, max_tokens: int) -> tuple[float, float, int]:
    """(ttft_s, decode tok/s after the first token, tokens)"""
    t0 = time.perf_counter()
    stamps: list[tuple[float, int]] = []  # (arrival, tokens generated so far)
    with httpx.stream(
        "POST",
        f"{url}/generate",
        timeout=600,
        json={
            "text": PROMPT,
            "stream": True,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0, "ignore_eos": True},
        },
    ) as r:
        for line in r.iter_lines():
            if line.startswith("data:") and line != "data: [DONE]":
                done = len(json.loads(line[5:])["output_ids"])  # cumulative per chunk
                stamps.append((time.perf_counter(), done))
    n = max_tokens
    ttft = stamps[0][0] - t0
    # A busy server may send several tokens in one chunk: count tokens, not chunks.
    (t_first, n_first), (t_last, n_last) = stamps[0], stamps[-1]
    rate = (n_last - n_first) / (t_last - t_first) if t_last > t_first else float("nan")
    return ttft, rate, n


def concurrent_rate(url: str, streams: int, max_tokens: int) -> float:
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(streams) as pool:
        list(pool.map(lambda _: stream_decode(url, max_tokens), range(streams)))
    return streams * max_tokens / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, default=Path("benchmark/results"))
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--kinds", nargs="+", default=["mxfp4", "bf16"])
    ap.add_argument(
        "--repeats", type=int, default=1, help="runs of each decode measure; the median is kept"
    )
    args = ap.parse_args()
    results = []
    for kind in args.kinds:
        load_start = os.getloadavg()[0]  # the box may be shared: the load is part of the result
        handle = start_server(bundled_model_path(kind), ["--enable-cache-report"])
        try:
            stream_decode(handle.base_url, 8)  # warm-up
            singles = [stream_decode(handle.base_url, args.tokens) for _ in range(args.repeats)]
            ttft = statistics.median(s[0] for s in singles)
            rate = statistics.median(s[1] for s in singles)
            n = args.tokens
            agg = statistics.median(
                concurrent_rate(handle.base_url, 4, args.tokens) for _ in range(args.repeats)
            )
        finally:
            handle.stop()
        row = {
            "model": kind,
            "startup_s": round(handle.startup_s, 1),
            "ttft_s": round(ttft, 3),
            "decode_tok_s_1_stream": round(rate, 1),
            "decode_tok_s_4_streams": round(agg, 1),
            "tokens": n,
            "load_avg_1min": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        }
        results.append(row)
        print(json.dumps(row))
    args.out.mkdir(parents=True, exist_ok=True)
    config = {
        "tokens": args.tokens,
        "repeats": args.repeats,
        "prompt_chars": len(PROMPT),
        "server_args": ["--enable-cache-report"],
    }
    record = {
        "benchmark": "serve_cpu",
        "stamp": stamp(config=config),
        "results": results,
    }
    (args.out / "serve_cpu.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"{'model':<8}{'startup s':>11}{'TTFT s':>9}{'tok/s 1':>9}{'tok/s x4':>10}")
    for r in results:
        print(
            f"{r['model']:<8}{r['startup_s']:>11}{r['ttft_s']:>9}{r['decode_tok_s_1_stream']:>9}"
            f"{r['decode_tok_s_4_streams']:>10}"
        )


if __name__ == "__main__":
    main()
