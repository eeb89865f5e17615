"""The greedy requests the serving checks send, and one record of what a server answered.

The same requests run on the CPU server (the tests) and on a GPU (scripts/gpu_serve_check.sh),
so their records compare token for token (`serve_compare`):
- short: prompts that fit in index_topk (every query sees all its keys);
- long: one prompt over index_topk and over a prefill chunk (DSA sparse selection, chunked
  extend), with its prompt log-probs;
- repeat: one prompt sent twice (the second must report cached tokens, whole 64-token pages);
- concurrent: 16 streamed requests at once (decode batches of up to 16);
- hostile: generated hostile requests (fixed seed) and every saved crasher; none may kill the
  worker, answer 5xx or leak a traceback.
Decode speed is measured apart (`decode_tok_s`).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from sglang_mx_lab.testing.served_distribution import HELD_OUT_TEXT

# The prompts of test_dsa_serving (it imports them from here).
SHORT_PROMPTS = [
    "import os\nimport sys\n\n\ndef main(",
    "class Config:\n    def __init__(self, path",
    '"""Utilities for reading and writing files."""\n\nfrom __future__ import',
]
# Source text in the style of the corpus (not copied from it): long prompts are repeats of it.
LONG_TEXT = (
    HELD_OUT_TEXT
    + '''    if hasstr and hasbytes:
        raise TypeError("Can't mix strings and bytes in path components") from None


class Window:
    """A sliding window over a sequence of items."""

    def __init__(self, items, size=8):
        self.items = list(items)
        self.size = size

    def __iter__(self):
        for start in range(0, max(len(self.items) - self.size + 1, 1)):
            yield self.items[start : start + self.size]
'''
)
CHUNK = 256  # --chunked-prefill-size of the checks' servers
PAGE = 64
SHORT_NEW = 24
LONG_NEW = 16
CONCURRENT = 16
CONCURRENT_NEW = 32
TOP_LOGPROBS = 5
# Server arguments both sides use (besides the model and what `sglang-mx serve` adds): float32
# compute, so GPU and CPU differ by float32 noise only (serve_compare's bounds).
SERVE_ARGS = ["--dtype", "float32", "--chunked-prefill-size", str(CHUNK)]
HOSTILE_SEED = 20261130
REGRESSIONS = (
    Path(__file__).resolve().parents[3] / "test" / "sglang_mx" / "guards" / "fuzz_regressions"
)


def long_ids(tokenizer, n: int) -> list[int]:
    ids: list[int] = []
    while len(ids) < n:
        ids += tokenizer(LONG_TEXT)["input_ids"]
    return ids[:n]


def concurrent_prompts() -> list[str]:
    return [f"{SHORT_PROMPTS[i % len(SHORT_PROMPTS)]}  # {i}" for i in range(CONCURRENT)]


def prompt_set(tokenizer, index_topk: int) -> dict[str, list[list[int]]]:
    """Token ids of every greedy request, by kind."""
    enc = lambda text: tokenizer(text)["input_ids"]  # noqa: E731
    return {
        "short": [enc(p) for p in SHORT_PROMPTS],
        "long": [long_ids(tokenizer, CHUNK + 2 * index_topk - PAGE)],
        "repeat": [long_ids(tokenizer, 3 * PAGE + 40)[::-1]],  # not a prefix of "long"
        "concurrent": [enc(p) for p in concurrent_prompts()],
    }


def generate(client: httpx.Client, url: str, ids: list[int], n: int, **extra) -> dict[str, Any]:
    body = {
        "input_ids": ids,
        "sampling_params": {"max_new_tokens": n, "temperature": 0.0},
        "return_logprob": True,
        "top_logprobs_num": TOP_LOGPROBS,
        **extra,
    }
    r = client.post(f"{url}/generate", json=body)
    if r.status_code != 200:
        raise RuntimeError(f"/generate answered {r.status_code}: {r.text[:300]}")
    return r.json()


def answer(out: dict[str, Any]) -> dict[str, Any]:
    """What a record keeps of one answer: ids, their log-probs and each step's top log-probs."""
    meta = out["meta_info"]
    return {
        "output_ids": out["output_ids"],
        "logprobs": [x[0] for x in meta["output_token_logprobs"]],
        "top": [[[t, lp] for lp, t, _ in row] for row in meta["output_top_logprobs"]],
        "cached_tokens": meta.get("cached_tokens", 0),
    }


def stream_answer(url: str, ids: list[int], n: int, timeout: float) -> dict[str, Any]:
    """A streamed greedy /generate, recorded as `answer` records it (from its last chunk)."""
    body = {
        "input_ids": ids,
        "sampling_params": {"max_new_tokens": n, "temperature": 0.0},
        "return_logprob": True,
        "top_logprobs_num": TOP_LOGPROBS,
        "stream": True,
    }
    last: dict[str, Any] = {}
    with httpx.stream("POST", f"{url}/generate", json=body, timeout=timeout) as r:
        if r.status_code != 200:
            raise RuntimeError(f"streamed /generate answered {r.status_code}")
        for line in r.iter_lines():
            if line.startswith("data:") and line != "data: [DONE]":
                last = json.loads(line[5:])
    return answer(last)


def greedy_record(url: str, prompts: dict[str, list[list[int]]], timeout: float) -> dict[str, Any]:
    """Every greedy request of `prompts`; a failed request is recorded, not raised."""
    rec: dict[str, Any] = {"failures": []}
    with httpx.Client(timeout=timeout) as client:

        def guarded(kind: str, fn):
            try:
                return fn()
            except Exception as e:  # one failed request must not hide the others
                rec["failures"].append(f"{kind}: {type(e).__name__}: {e}"[:400])
                return None

        rec["short"] = [
            guarded("short", lambda ids=ids: answer(generate(client, url, ids, SHORT_NEW)))
            for ids in prompts["short"]
        ]

        def long_one(ids):
            out = generate(client, url, ids, LONG_NEW, logprob_start_len=0)
            rec_long = answer(out)
            rec_long["prompt_logprobs"] = [x[0] for x in out["meta_info"]["input_token_logprobs"]]
            return rec_long

        rec["long"] = [guarded("long", lambda ids=ids: long_one(ids)) for ids in prompts["long"]]
        rec["repeat"] = [
            guarded("repeat", lambda ids=ids: answer(generate(client, url, ids, SHORT_NEW)))
            for ids in prompts["repeat"] * 2
        ]
    with cf.ThreadPoolExecutor(CONCURRENT) as pool:
        futs = [
            pool.submit(stream_answer, url, ids, CONCURRENT_NEW, timeout)
            for ids in prompts["concurrent"]
        ]
        rec["concurrent"] = []
        for f in futs:
            try:
                rec["concurrent"].append(f.result())
            except Exception as e:
                rec["failures"].append(f"concurrent: {type(e).__name__}: {e}"[:400])
                rec["concurrent"].append(None)
    return rec


def decode_tok_s(url: str, ids: list[int], n: int, streams: int, timeout: float) -> float:
    """Output tokens per second of `streams` concurrent greedy requests of n tokens each, from
    the first streamed token to the last (prefill excluded)."""
    body = {
        "input_ids": ids,
        "sampling_params": {"max_new_tokens": n, "temperature": 0.0, "ignore_eos": True},
        "stream": True,
    }

    def one() -> tuple[float, float, int]:
        first = last = 0.0
        count = 0
        with httpx.stream("POST", f"{url}/generate", json=body, timeout=timeout) as r:
            for line in r.iter_lines():
                if line.startswith("data:") and line != "data: [DONE]":
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    count = len(json.loads(line[5:])["output_ids"])
        return first, last, count

    with cf.ThreadPoolExecutor(streams) as pool:
        runs = list(pool.map(lambda _: one(), range(streams)))
    span = max(r[1] for r in runs) - min(r[0] for r in runs)
    tokens = sum(r[2] - 1 for r in runs)
    return tokens / span if span > 0 else 0.0


def hostile_record(url: str, budget_s: float, min_n: int) -> dict[str, Any]:
    """Generated hostile requests (fixed seed, time budget) and every saved crasher."""
    from sglang_mx_lab.testing.campaign import for_each_hostile
    from sglang_mx_lab.testing.hostile import SGLANG_ROUTES, HostileRequest, Target, attack

    served = httpx.get(url + "/v1/models", timeout=30).json()["data"][0]
    info = httpx.get(url + "/get_model_info", timeout=30).json()
    target = Target(served["id"], info["vocab_size"], info["context_length"])
    failures: list[dict[str, Any]] = []
    deaths = 0
    with httpx.Client(timeout=60) as client:

        def one(req: HostileRequest, name: str) -> None:
            nonlocal deaths
            if deaths:
                return  # no supervisor here: a dead worker answers nothing more
            out = attack(client, url, req, url)
            if out.failed:
                deaths += out.failure == "worker_death"
                failures.append(
                    {
                        "case": name,
                        "failure": out.failure,
                        "status": out.status,
                        "request": req.to_json(),
                        "text": out.text[:300],
                    }
                )

        sent = for_each_hostile(
            SGLANG_ROUTES,
            target,
            100_000,
            HOSTILE_SEED,
            lambda req: one(req, "generated"),
            budget_s,
            min_n,
        )
        saved = sorted(REGRESSIONS.glob("*.json"))
        for path in saved:
            case = json.loads(path.read_text())
            req = HostileRequest.from_json(case["request"])
            body = req.body.replace("{{model}}", target.model)
            one(HostileRequest(req.route, body, req.content_type), path.stem)
    return {"generated": sent, "saved": len(saved), "worker_deaths": deaths, "failures": failures}


@contextmanager
def topk_dump_server(model_dir: Path | str, dump_dir: Path, args: list[str]) -> Iterator[Any]:
    """A float32 server with the cache report on whose indexer writes each call's positions and
    selection into `dump_dir` (attention/dsa/indexer.py's TOPK_DUMP_ENV); stopped on exit."""
    from sglang_mx.attention.dsa.indexer import TOPK_DUMP_ENV

    from sglang_mx_lab.testing.server import start_server

    args = ["--dtype", "float32", "--enable-cache-report", *args]
    handle = start_server(str(model_dir), args, env={TOPK_DUMP_ENV: str(dump_dir)})
    try:
        yield handle
    finally:
        handle.stop(wait=False)
