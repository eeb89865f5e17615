"""What a streaming client of a real SGLang server can count of the tokens it was sent (issue 54,
item 5b): content chunks and `logprobs` entries against the server's running usage, on concurrent
chat streams of the bundled MXFP4 model, as the fault campaigns send them (ignore_eos, greedy).

    python benchmark/stream_token_count.py --out docs/results/stream-token-count-cpu.json

A failed stream's ledger row is billed the running usage of the last chunk the provider relayed;
the client sees the chunks (and, asked for, their logprobs) but not that usage. Where either
count falls short of the usage on completed streams, a client cannot hold a failed one's bill
to within one token (lab/sglang_mx_lab/testing/streams.py, ledger_problems)."""

from __future__ import annotations

import argparse
import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from sglang_mx.assets import bundled_model_path
from sglang_mx.measure.stamp import stamp
from sglang_mx_lab.testing.server import start_server


def one_stream(url: str, model: str, max_tokens: int) -> dict:
    """One chat stream: its content chunks, logprob entries, and the usage counts it carried."""
    body = {"model": model, "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
            "temperature": 0, "logprobs": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "messages": [{"role": "user",
                          "content": f"[{uuid.uuid4().hex}] Tell a story."}]}  # fmt: skip
    chunks = logprobs = merged = empty_steps = 0
    last_usage = 0
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            usage = (event.get("usage") or {}).get("completion_tokens")
            for choice in event.get("choices") or ():
                if (choice.get("delta") or {}).get("content"):
                    chunks += 1
                    entries = len((choice.get("logprobs") or {}).get("content") or ())
                    logprobs += entries
                    step = (usage or last_usage) - last_usage
                    merged += step > 1
                    empty_steps += step - entries  # tokens this chunk's usage counts, no logprob
            if usage is not None:
                last_usage = usage
    return {"chunks": chunks, "logprobs": logprobs, "tokens": last_usage,
            "merged_chunks": merged, "tokens_without_logprob": empty_steps}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    handle = start_server(bundled_model_path("mxfp4"), ["--enable-cache-report"])
    try:
        model = httpx.get(handle.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
        rows = []
        with ThreadPoolExecutor(args.streams) as pool:
            for _ in range(args.rounds):
                rows += pool.map(lambda _: one_stream(handle.base_url, model, args.max_tokens),
                                 range(args.streams))  # fmt: skip
    finally:
        handle.stop()
    short = {k: sum(r[k] < r["tokens"] for r in rows) for k in ("chunks", "logprobs")}
    gap = {k: max(r["tokens"] - r[k] for r in rows) for k in ("chunks", "logprobs")}
    record = {
        **stamp(config=vars(args) | {"out": str(args.out), "model": "bundled mxfp4 (GLM-4.5)"}),
        "what": " ".join(__doc__.split("\n\n")[0].split()),
        "streams": len(rows),
        "streams_where_count_fell_short": short,
        "largest_shortfall_tokens": gap,
        "rows": rows,
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("streams", "streams_where_count_fell_short",
                                             "largest_shortfall_tokens")}))  # fmt: skip


if __name__ == "__main__":
    main()
