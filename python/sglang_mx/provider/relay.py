"""Relay one upstream SSE stream to the client: keep-alive comments while upstream is silent,
an in-band error event if the upstream fails mid-stream, an upstream abort if the client leaves,
and the ledger rows closed whatever happened. `StreamRelay` is the part both routes share;
`chunk` and `closing` (and `error_event`) are what a route's relay says about its own format
(`openai_service.OpenAIStreamRelay`, `native_service.NativeStreamRelay`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx

from sglang_mx.provider import jsonio
from sglang_mx.provider.context import RequestContext, Settlement
from sglang_mx.provider.errors import ProviderError
from sglang_mx.provider.prometheus import ProviderMetrics
from sglang_mx.provider.settings import ProviderSettings

# What a keep-alive writes while the upstream is silent (queueing, prefill, a slow step). The
# default is an empty line pair: every client skips it. SSE parsers (the OpenAI SDKs, EventSource)
# dispatch nothing for an event without data; line-based clients (SGLang's and vLLM's benchmark
# clients, LLMPerf) strip and skip empty lines. OpenRouter's `: PROCESSING` comment is valid SSE,
# but those line-based clients json-decode every other line, so each comment failed one of
# their requests (issue 41: SGLang's client lost 12-16 of 32 whenever a first token took longer
# than one keep-alive period). The OpenAI API itself sends neither.
KEEPALIVE_BYTES = {"blank": b"\n\n", "comment": b": PROCESSING\n\n"}  # settings.KEEPALIVE_FRAMES
DONE = b"data: [DONE]\n\n"


class UpstreamStreamError(Exception):
    pass


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + jsonio.dumps(payload) + b"\n\n"


class StreamRelay:
    def __init__(
        self,
        ctx: RequestContext,
        settle: Settlement,
        metrics: ProviderMetrics,
        settings: ProviderSettings,
        stack: AsyncExitStack,
        opening: asyncio.Future[httpx.Response],
    ) -> None:
        self.ctx, self.settle, self.metrics, self.settings = ctx, settle, metrics, settings
        self.stack, self.opening = stack, opening
        self.created = int(time.time())
        self.chunks = 0  # content chunks relayed: token count if upstream sends no usage

    # --- what a route's relay says ------------------------------------------------------------

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        """One upstream event as the client gets it (counts updated), or None to skip it."""
        raise NotImplementedError

    def closing(self) -> list[bytes]:
        """What follows the last chunk when the upstream finished."""
        raise NotImplementedError

    def error_event(self, code: int, msg: str, reason: str) -> bytes:
        raise NotImplementedError

    # --- shared ----------------------------------------------------------------------------------

    async def _lines(self) -> AsyncIterator[bytes | str]:
        """Upstream lines, with the keep-alive frame (bytes) whenever upstream stays silent for a
        while.

        Lines are split from the raw body here (LF or CRLF endings, as SGLang and the router
        send), one read at a time: a read usually holds a whole event, so this waits once per
        event rather than once per line through httpx's text decoders."""
        keepalive_s = self.settings.keepalive_s
        keepalive = KEEPALIVE_BYTES[self.settings.keepalive_frame]
        while not (await asyncio.wait({self.opening}, timeout=keepalive_s))[0]:
            yield keepalive
        reads = self.opening.result().aiter_raw().__aiter__()  # raises the upstream's refusal
        buf = b""
        pending: asyncio.Future | None = None
        try:
            while True:
                if b"\n" in buf:
                    *lines, buf = buf.split(b"\n")  # linear, however many lines one read holds
                    for line in lines:
                        yield (line[:-1] if line.endswith(b"\r") else line).decode(errors="replace")
                if pending is None:
                    pending = asyncio.ensure_future(reads.__anext__())
                done, _ = await asyncio.wait({pending}, timeout=keepalive_s)
                if not done:
                    yield keepalive
                    continue
                fut, pending = pending, None
                try:
                    buf += fut.result()
                except StopAsyncIteration:
                    if buf:
                        yield buf.decode(errors="replace")
                    return
        finally:
            if pending is not None:
                pending.cancel()

    def _observe_token_gap(self, model_id: str, t_start: float, t_last: float | None) -> float:
        """Record time to first chunk (t_last None) or the gap since the last one; now."""
        now = time.perf_counter()
        if t_last is None:
            self.metrics.ttft.labels(model_id).observe(now - t_start)
        else:
            self.metrics.itl.labels(model_id).observe(now - t_last)
        return now

    async def _upstream_events(self, lines: AsyncIterator[bytes | str]):
        """Upstream SSE events as dicts, keep-alives (bytes) passed through; raises
        UpstreamStreamError on a malformed or error event, or when the stream ends without
        [DONE]. Shared by the OpenAI-route and native-route relays."""
        async for line in lines:
            if isinstance(line, bytes):
                yield line
                continue
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                chunk = jsonio.loads(data)
            except ValueError as e:
                raise UpstreamStreamError(f"upstream sent a malformed event: {data[:100]}") from e
            if not isinstance(chunk, dict) or "error" in chunk or chunk.get("object") == "error":
                err = chunk.get("error", chunk) if isinstance(chunk, dict) else chunk
                msg = err.get("message", "upstream error") if isinstance(err, dict) else err
                raise UpstreamStreamError(f"upstream error: {str(msg)[:300]}")
            yield chunk
        raise UpstreamStreamError("upstream closed the stream before it finished")

    async def events(self) -> AsyncIterator[bytes]:
        ctx = self.ctx
        status, error = "aborted", "client disconnected"
        t_start = time.perf_counter()
        t_last: float | None = None
        flush_every = self.settings.ledger_flush_tokens
        lines = self._lines()
        try:
            async for chunk in self._upstream_events(lines):
                if isinstance(chunk, bytes):
                    yield chunk  # keep-alive frame
                    continue
                out = self.chunk(chunk)
                if out is None:
                    continue
                t_last = self._observe_token_gap(ctx.model.id, t_start, t_last)
                self.chunks += 1
                yield out
                if self.chunks % flush_every == 0:
                    self.settle.progress(ctx)  # so a crash bills what was produced up to here
            tail = self.closing()
            status, error = "ok", None
            for part in tail:
                yield part
        except (UpstreamStreamError, httpx.HTTPError, ProviderError) as e:
            status, error = "error", str(e) or type(e).__name__
            if isinstance(e, ProviderError):  # refused after the SSE response had started
                code, reason, msg = e.status, e.reason, e.message
            else:
                code = 408 if isinstance(e, httpx.TimeoutException) else 502
                reason, msg = "upstream_stream_failed", f"upstream failed mid-stream: {error}"
            self.metrics.errors.labels(str(code), reason).inc()
            yield self.error_event(code, msg, reason)
            yield DONE
        finally:
            if status == "aborted":
                self.settle.abort_upstream(ctx)
            await self._close(lines)
            self.settle.finish(ctx, status, error)

    async def _close(self, lines: AsyncIterator) -> None:
        if not self.opening.done():
            self.opening.cancel()
        try:
            await lines.aclose()  # type: ignore[attr-defined]
            await self.stack.aclose()
        except Exception:  # noqa: BLE001 - closing a broken upstream stream must not mask billing
            pass
