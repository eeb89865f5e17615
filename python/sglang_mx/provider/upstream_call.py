"""One skeleton for opening the upstream, for every route: a unary call watches for the client
leaving (then cancels, aborts upstream and closes the ledger rows as aborted), a stream keeps
a quick refusal's HTTP status and answers a slow upstream at once with an SSE response whose
relay sends keep-alives until it answers. Every failure closes the rows before it propagates."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx
from starlette.requests import Request

from sglang_mx.provider.context import RequestContext, Settlement
from sglang_mx.provider.sse_response import EventStreamResponse
from sglang_mx.provider.upstream import Upstream

_DISCONNECT_POLL_S = 0.25


class ClientLeft(Exception):
    """The client disconnected before the upstream answered (the rows are closed: 499)."""


async def call_unary(
    upstream: Upstream,
    settle: Settlement,
    request: Request,
    ctx: RequestContext,
    path: str,
    body: dict[str, Any],
) -> Any:
    """The upstream's JSON reply; ClientLeft when the client left first."""
    ctx.t0 = time.perf_counter()
    call = asyncio.ensure_future(upstream.post_json(path, body))
    # A client that leaves must not keep the upstream generating: watch for the disconnect.
    while not call.done():
        await asyncio.wait({call}, timeout=_DISCONNECT_POLL_S)
        if not call.done() and await request.is_disconnected():
            call.cancel()
            settle.abort_upstream(ctx)
            settle.finish(ctx, "aborted", "client left", zero=True)
            raise ClientLeft
    try:
        return call.result()
    except Exception as e:  # every request leaves the ledger finalized, whatever failed
        settle.finish(ctx, "error", str(e)[:500], zero=True)
        raise


async def open_stream(
    upstream: Upstream,
    settle: Settlement,
    keepalive_s: float,
    ctx: RequestContext,
    path: str,
    body: dict[str, Any],
    relay: Callable[[AsyncExitStack, asyncio.Future[httpx.Response]], AsyncIterator[bytes]],
) -> EventStreamResponse:
    """An SSE response over `relay(stack, opening)`, the relay's events."""
    ctx.t0 = time.perf_counter()
    stack = AsyncExitStack()
    opening = asyncio.ensure_future(stack.enter_async_context(upstream.stream(path, body)))
    # Refusals that come quickly (upstream down, bad request) keep their HTTP status; a slow
    # upstream gets an SSE response at once, with keep-alives until it answers.
    await asyncio.wait({opening}, timeout=keepalive_s)
    if opening.done() and opening.exception() is not None:
        await stack.aclose()
        exc = opening.exception()
        settle.finish(ctx, "error", str(exc), zero=True)
        raise exc
    return EventStreamResponse(
        relay(stack, opening),
        headers={"X-Request-Id": ctx.rid, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
