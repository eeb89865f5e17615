"""Relay one upstream SSE stream to the client: keep-alive comments while upstream is silent,
public model id on every chunk, a final usage chunk with cost before `[DONE]`, an in-band error
event if the upstream fails mid-stream, and an upstream abort if the client leaves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import httpx

from sglang_mx.provider import jsonio
from sglang_mx.provider.errors import ProviderError, sse_error_event
from sglang_mx.provider.usage import TokenCounts

if TYPE_CHECKING:
    from sglang_mx.provider.keys import ApiKey
    from sglang_mx.provider.service import Provider
    from sglang_mx.provider.validation import ParsedRequest

KEEPALIVE = b": PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"


class UpstreamStreamError(Exception):
    pass


class StreamRelay:
    def __init__(
        self,
        provider: Provider,
        stack: AsyncExitStack,
        opening: asyncio.Future[httpx.Response],
        rid: str,
        key: ApiKey,
        parsed: ParsedRequest,
        endpoint: str,
    ) -> None:
        self.p, self.stack, self.opening, self.rid = provider, stack, opening, rid
        self.key, self.parsed, self.endpoint = key, parsed, endpoint
        self.obj = "chat.completion.chunk" if endpoint == "chat" else "text_completion"
        self.counts = TokenCounts()
        self.created = int(time.time())
        self.chunks = 0  # content chunks relayed: token count if upstream sends no usage

    def _sse(self, payload: dict[str, Any]) -> bytes:
        return b"data: " + jsonio.dumps(payload) + b"\n\n"

    async def _lines(self) -> AsyncIterator[bytes | str]:
        """Upstream lines, with KEEPALIVE (bytes) whenever upstream stays silent for a while.

        Lines are split from the raw body here (LF or CRLF endings, as SGLang and the router
        send), one read at a time: a read usually holds a whole event, so this waits once per
        event rather than once per line through httpx's text decoders."""
        keepalive_s = self.p.settings.keepalive_s
        while not (await asyncio.wait({self.opening}, timeout=keepalive_s))[0]:
            yield KEEPALIVE
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
                    yield KEEPALIVE
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
            self.p.metrics.ttft.labels(model_id).observe(now - t_start)
        else:
            self.p.metrics.itl.labels(model_id).observe(now - t_last)
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
        model = self.parsed.model
        status, error = "aborted", "client disconnected"
        t_start = time.perf_counter()
        t_last: float | None = None
        flush_every = self.p.settings.ledger_flush_tokens
        lines = self._lines()
        try:
            async for chunk in self._upstream_events(lines):
                if isinstance(chunk, bytes):
                    yield chunk  # keep-alive comment
                    continue
                self.counts.update(chunk.pop("usage", None))
                if not chunk.get("choices"):
                    continue  # upstream's own usage-only chunk; ours comes last
                t_last = self._observe_token_gap(model.id, t_start, t_last)
                self.chunks += 1
                chunk["model"], chunk["id"] = model.id, self.rid
                yield self._sse(chunk)
                if self.chunks % flush_every == 0:
                    # So a crash bills what was produced up to here.
                    c = self.counts
                    self.p.ledger.progress(self.rid, c.prompt, c.completion, c.cached)
            if self.counts.completion == 0:
                self.counts.completion = self.chunks
            usage = self.counts.billed(model)
            final = {
                "id": self.rid,
                "object": self.obj,
                "created": self.created,
                "model": model.id,
                "provider": "sglang-mx",
                "choices": [],
                "usage": usage,
            }
            status, error = "ok", None
            yield self._sse(final)
            yield DONE
        except (UpstreamStreamError, httpx.HTTPError, ProviderError) as e:
            status, error = "error", str(e) or type(e).__name__
            if isinstance(e, ProviderError):  # refused after the SSE response had started
                code, reason, msg = e.status, e.reason, e.message
            else:
                code = 408 if isinstance(e, httpx.TimeoutException) else 502
                reason, msg = "upstream_stream_failed", f"upstream failed mid-stream: {error}"
            self.p.metrics.errors.labels(str(code), reason).inc()
            yield sse_error_event(self.rid, model.id, self.created, code, msg, reason, self.obj)
            yield DONE
        finally:
            if status == "aborted":
                # Client gone: tell SGLang to free the request's KV now, not at the next token.
                asyncio.ensure_future(self.p.upstream.abort(self.rid))
            await self._close(lines)
            self.p.finish(
                self.rid, self.key, self.parsed, self.endpoint, status, self.counts, error
            )

    async def _close(self, lines: AsyncIterator) -> None:
        if not self.opening.done():
            self.opening.cancel()
        try:
            await lines.aclose()  # type: ignore[attr-defined]
            await self.stack.aclose()
        except Exception:  # noqa: BLE001 - closing a broken upstream stream must not mask billing
            pass
