"""Helpers for provider tests: pricing files, in-process servers for scripted upstreams, killing
a server process tree; the provider and router processes come from sglang_mx.provider.launch."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from sglang_mx.provider.launch import (  # noqa: F401
    free_port,
    pd_router_process,
    provider_process,
    router_process,
)
from sglang_mx_lab.testing.inprocess import serve_in_thread  # noqa: F401

PRICES = {"prompt": 0.5, "completion": 2.0, "input_cache_read": 0.05}
MODEL_ID = "sglang-mx/glm-tiny-mxfp4"


def expected_cost(prompt: int, completion: int, cached: int) -> float:
    """USD for a request's tokens at PRICES (per million tokens; cached ones at the cache rate)."""
    return (
        (prompt - cached) * PRICES["prompt"]
        + cached * PRICES["input_cache_read"]
        + completion * PRICES["completion"]
    ) / 1e6


def write_pricing(
    path: Path, upstream_model: str, context_length: int = 2048, max_completion_tokens: int = 512
) -> Path:
    entry = {
        "id": MODEL_ID,
        "upstream_model": upstream_model,
        "name": "GLM tiny (MXFP4 experts)",
        "description": "bundled toy MoE",
        "context_length": context_length,
        "max_completion_tokens": max_completion_tokens,
        "quantization": "mxfp4",
        "usd_per_m": PRICES,
        "supported_features": ["json_mode"],
    }
    path.write_text(json.dumps({"models": [entry]}))
    return path


# A provider in front of the session's SGLang server for the module's tests: a short keep-alive
# and a request rate no test reaches.
TEST_PROVIDER_ARGS = ("--keepalive-s", "0.5", "--default-rpm", "100000")


def price_served_model(upstream: str, tmp: Path) -> tuple[int, Path]:
    """(context length, pricing file) for the model `upstream` serves, priced at its context;
    completions may take all but 256 tokens of it."""
    served = httpx.get(upstream + "/v1/models", timeout=30).json()["data"][0]
    ctx = int(served.get("max_model_len") or 2048)
    pricing = write_pricing(
        tmp / "pricing.json", served["id"], context_length=ctx, max_completion_tokens=ctx - 256
    )
    return ctx, pricing


@contextlib.contextmanager
def priced_provider(upstream: str, tmp: Path, db: Path) -> Iterator[dict[str, Any]]:
    """A provider (TEST_PROVIDER_ARGS, keys from `db`) in front of the session's SGLang server,
    its served model priced by price_served_model; yields what a module's tests need of it:
    url, upstream, db, ctx (the context length) and pricing (the file)."""
    ctx, pricing = price_served_model(upstream, tmp)
    with provider_process(upstream, pricing, db, *TEST_PROVIDER_ARGS) as prov:
        yield {"url": prov.url, "upstream": upstream, "db": db, "ctx": ctx, "pricing": pricing}


def kill_server_tree(base_url: str) -> int:
    """SIGKILL the process listening on base_url's port and all its children (a dead worker)."""
    import psutil

    port = int(base_url.rsplit(":", 1)[1])
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            root = psutil.Process(conn.pid)
            procs = [root, *root.children(recursive=True)]
            for p in procs:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(procs, timeout=10)
            return conn.pid
    raise AssertionError(f"nothing listens on port {port}")


def upstream_running(base_url: str, since: float = 0.0) -> int | None:
    """Requests SGLang is running or queueing, from its /v1/loads; None if the scheduler's
    snapshot predates `since` (wall clock), as it lags by a scheduler step."""
    data = httpx.get(base_url + "/v1/loads", timeout=30).json()
    if any(load.get("timestamp", 0) <= since for load in data.get("loads", [])):
        return None
    total = 0

    def walk(node: object) -> None:
        nonlocal total
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("num_running_reqs", "num_waiting_reqs") and isinstance(v, int):
                    total += v
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(data.get("loads", data))
    return total


def leave_stream_after(url: str, body: dict, headers: dict, chunks: int = 3) -> tuple[str, float]:
    """Open a streamed request, read `chunks` data events (so SGLang is decoding), then drop the
    connection. Returns the provider's request id and the wall time the client left."""
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as r:
        rid = r.headers["x-request-id"]
        seen = 0
        for line in r.iter_lines():
            seen += line.startswith("data:")
            if seen == chunks:
                break
    return rid, time.time()


def wait_until_settled(upstream: str, db: Path, rid: str, left_at: float, timeout_s: float = 30):
    """Wait until SGLang runs nothing started before `left_at` and the ledger row leaves
    "pending"; returns the row."""
    from sglang_mx.provider.ledger import Ledger

    deadline = time.monotonic() + timeout_s
    while upstream_running(upstream, since=left_at) != 0:
        assert time.monotonic() < deadline, "SGLang kept generating after the client left"
        time.sleep(0.2)
    while Ledger(db).get(rid).status == "pending":
        assert time.monotonic() < deadline, "the ledger row stayed pending"
        time.sleep(0.1)
    return Ledger(db).get(rid)


def abandon_stream(prov: dict[str, Any], route: str, body: dict, headers: dict):
    """Leave a stream on `route` of a priced_provider after three chunks, then wait until SGLang
    stops and the ledger settles; returns the ledger row."""
    rid, left_at = leave_stream_after(prov["url"] + route, body, headers)
    return wait_until_settled(prov["upstream"], prov["db"], rid, left_at)
