"""provider -> sglang-router (cache_aware) -> 2 real SGLang workers of the bundled model: it
serves and bills, and a worker killed under load makes requests fail fast or finish on the
other worker, none hang, and the ledger stays consistent."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from provider_support import (
    MODEL_ID,
    kill_server_tree,
    provider_process,
    router_process,
    write_pricing,
)
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger

pytestmark = pytest.mark.server

WORKER_ARGS = ["--enable-cache-report"]
REQUEST_BOUND_S = 90  # a request outliving this counts as hung


@pytest.fixture(scope="module")
def topology(tmp_path_factory):
    from sglang_mx.assets import bundled_model_path
    from sglang_mx.testing.server import launch_server

    tmp = tmp_path_factory.mktemp("router")
    model = str(bundled_model_path("mxfp4"))
    with ExitStack() as stack:
        # Start both workers at once: each start-up is ~30-40 s of mostly-idle waiting.
        cms = [launch_server(model, extra_args=WORKER_ARGS) for _ in range(2)]
        with ThreadPoolExecutor(2) as pool:
            workers = list(pool.map(lambda cm: cm.__enter__(), cms))
        for cm in cms:
            stack.push(cm.__exit__)
        router = stack.enter_context(router_process(workers, "cache_aware"))
        served = httpx.get(workers[0] + "/v1/models", timeout=30).json()["data"][0]["id"]
        pricing = write_pricing(tmp / "pricing.json", served)
        db = tmp / "provider.sqlite"
        _, key = KeyStore(db).create("router-test")
        prov = stack.enter_context(provider_process(router, pricing, db, "--default-rpm",
                                                    "100000"))  # fmt: skip
        yield {"url": prov.url, "router": router, "workers": workers, "db": db, "key": key}


def _stream(url: str, key: str, prompt: str, max_tokens: int) -> dict:
    """One streamed chat request; returns how it ended and how long it took."""
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "stream": True, "ignore_eos": True}  # fmt: skip
    t0 = time.monotonic()
    out = {"status": None, "rid": None, "chunks": 0, "usage": None, "error": None}
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body,
                          headers={"Authorization": f"Bearer {key}"},
                          timeout=REQUEST_BOUND_S) as r:  # fmt: skip
            out["status"], out["rid"] = r.status_code, r.headers.get("x-request-id")
            if r.status_code != 200:
                out["error"] = r.read().decode()
            else:
                for line in r.iter_lines():
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    event = json.loads(line[5:])
                    if "error" in event:
                        out["error"] = event["error"]
                    elif event.get("usage"):
                        out["usage"] = event["usage"]
                    else:
                        out["chunks"] += 1
    except httpx.HTTPError as e:
        out["error"] = repr(e)
    out["elapsed"] = time.monotonic() - t0
    return out


def test_serves_and_caches_through_router(topology) -> None:
    prompt = f"[{uuid.uuid4().hex}] " + "Shared system prompt about rivers and mills. " * 30
    results = [_stream(topology["url"], topology["key"], prompt, 4) for _ in range(3)]
    for r in results:
        assert r["status"] == 200 and r["usage"]["completion_tokens"] == 4, r
    # cache_aware sends the repeats to the worker holding the prefix.
    assert results[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_worker_killed_under_load(topology) -> None:
    url, key = topology["url"], topology["key"]
    prompts = [f"[{uuid.uuid4().hex}] Tell a long story about mill number {i}." for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(_stream, url, key, p, 120) for p in prompts]
        time.sleep(4)  # every request is decoding by now
        kill_server_tree(topology["workers"][1])
        during = [f.result(timeout=REQUEST_BOUND_S + 30) for f in futures]
    assert all(r["elapsed"] < REQUEST_BOUND_S for r in during), "a request hung"
    for r in during:
        finished = r["status"] == 200 and r["usage"] and not r["error"]
        failed_cleanly = r["status"] in (502, 503) or (r["status"] == 200 and r["error"])
        assert finished or failed_cleanly, r
    # After the kill: requests fail fast or land on the surviving worker, and soon all succeed.
    after = [_stream(url, key, f"[{uuid.uuid4().hex}] hello", 4) for _ in range(6)]
    assert all(r["elapsed"] < 30 for r in after), after
    assert after[-1]["status"] == 200 and after[-1]["usage"], after
    # Ledger: every request recorded exactly once, none left pending, bills match usage.
    rows = {row.id: row for row in Ledger(topology["db"]).rows()}
    assert not [r for r in rows.values() if r.status == "pending"]
    for r in during + after:
        if r["rid"] is None:
            continue
        row = rows[r["rid"]]
        if r["usage"]:
            assert row.status == "ok" and row.completion_tokens == r["usage"]["completion_tokens"]
            assert row.cost == pytest.approx(r["usage"]["cost"])
        else:
            assert row.status == "error" and row.completion_tokens <= 120


def test_health_through_router(topology) -> None:
    assert httpx.get(topology["url"] + "/health", timeout=30).status_code == 200
    assert Path(topology["db"]).exists()
