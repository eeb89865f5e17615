"""A lying proxy in front of a real server, in a process of its own (issue 45, item 2): what a
vendor's endpoint could do that `bench verify` must catch. Every route is relayed as is, except
that the OpenAI completion routes can be

- `delay_s`: slowed, each streamed event held that long (a slower endpoint than the server);
- `inflate`: billed for more than they streamed, `usage.completion_tokens` raised by that many;
- `fail_every`: failed, every Nth completion request answered 503 without reaching the server.

Its own process, so the proxy's event loop never holds the load generator's GIL (the client's
self-check would rightly call such a run client-bound)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
from collections.abc import Iterator
from dataclasses import asdict, dataclass

COMPLETION_ROUTES = ("/v1/completions", "/v1/chat/completions")


@dataclass(frozen=True)
class Lies:
    delay_s: float = 0.0
    inflate: int = 0
    fail_every: int = 0


def _lie_about_usage(line: bytes, inflate: int) -> bytes:
    """One SSE `data:` line (or a whole JSON body) with its usage raised by `inflate`."""
    prefix = b"data: " if line.startswith(b"data: ") else b""
    payload = line[len(prefix) :]
    if not inflate or payload.strip() in (b"", b"[DONE]"):
        return line
    try:
        obj = json.loads(payload)
    except ValueError:
        return line
    usage = obj.get("usage") if isinstance(obj, dict) else None
    if not usage:
        return line
    usage["completion_tokens"] = usage.get("completion_tokens", 0) + inflate
    usage["total_tokens"] = usage.get("total_tokens", 0) + inflate
    return prefix + json.dumps(obj).encode()


def build_app(upstream: str, lies: Lies):
    import asyncio

    import httpx
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    state = {"n": 0, "client": None}

    async def relay(request: Request):
        body = await request.body()
        lying = request.method == "POST" and request.url.path in COMPLETION_ROUTES
        if lying:
            state["n"] += 1
            if lies.fail_every and state["n"] % lies.fail_every == 0:
                error = {"message": "overloaded (planted)", "type": "server_error", "code": 503}
                return JSONResponse({"error": error}, 503)
        if state["client"] is None:
            state["client"] = httpx.AsyncClient(timeout=600)
        client = state["client"]
        query = f"?{request.url.query}" if request.url.query else ""
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        req = client.build_request(
            request.method, upstream + request.url.path + query, content=body, headers=headers
        )
        up = await client.send(req, stream=True)
        kind = up.headers.get("content-type", "application/json")
        if not lying:
            return StreamingResponse(up.aiter_raw(), up.status_code, {"content-type": kind},
                                     background=BackgroundTask(up.aclose))  # fmt: skip
        if "text/event-stream" not in kind:
            data = await up.aread()
            await up.aclose()
            return Response(_lie_about_usage(data, lies.inflate), up.status_code,
                            media_type=kind)  # fmt: skip

        async def events():
            async for line in up.aiter_lines():
                if lies.delay_s and line.startswith("data: "):
                    await asyncio.sleep(lies.delay_s)
                yield _lie_about_usage(line.encode(), lies.inflate) + b"\n"

        return StreamingResponse(events(), up.status_code, {"content-type": kind},
                                 background=BackgroundTask(up.aclose))  # fmt: skip

    methods = ["GET", "POST", "DELETE"]
    return Starlette(routes=[Route("/{path:path}", relay, methods=methods)])


def _serve(upstream: str, lies: dict, port: int) -> None:
    import uvicorn

    uvicorn.run(build_app(upstream, Lies(**lies)), host="127.0.0.1", port=port,
                log_level="critical")  # fmt: skip


@contextlib.contextmanager
def liar_proxy(upstream: str, lies: Lies) -> Iterator[str]:
    """Serve the proxy in front of `upstream` until the block exits; yields its base URL."""
    import time

    import httpx

    from sglang_mx_lab.testing.server import free_port

    port = free_port()
    proc = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(upstream, asdict(lies), port), daemon=True
    )
    proc.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/v1/models", timeout=5)
                break
            except httpx.HTTPError:
                if not proc.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"the liar proxy on {url} did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.join(10)
