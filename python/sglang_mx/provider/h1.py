"""An httpx transport for the provider's upstream: HTTP/1.1 keep-alive connections on asyncio
protocols, responses parsed by httptools (the C parser uvicorn serves with).

Why not httpx's default transport (httpcore over anyio, with the pure-Python h11 parser): a
1-token call through it costs ~400 us of CPU on the 2-core development box; the provider's whole
unary call over this one costs ~135 us including JSON, against an added-latency budget of 2 ms
(docs/provider.md, Benchmarks). The provider keeps httpx's client, requests, responses, timeouts
and exception classes; only the wire work is here.

Against aiohttp's client (benchmark/provider_client_choice.py, 2026-12-03, 2-core AMD EPYC AVX2
box at load 2.6-4.7, null upstream, 3 rounds of 1,000 calls): a unary call 223 us of CPU here,
291 us through aiohttp, 1,289 us through httpx's default transport; a 32-event stream 691 /
796 / 2,386 us. aiohttp is within 68 us a call (3% of the 2 ms budget): that difference does not
matter, so by the project's rule a library should serve here. Not switched yet: the provider's
relays read httpx responses, and this module's two behaviours the ledger relies on (a
half-read stream closes its connection so SGLang aborts the request; a stale keep-alive
connection is retried once) must be shown on aiohttp first. Open in issue 43.

Scope, on purpose: plain `http://` to an SGLang server or sglang-router, HTTP/1.1, no proxies,
TLS or HTTP/2 (refused with httpx.UnsupportedProtocol). Responses may be Content-Length, chunked
or close-delimited. A response left before the upstream finished sending it closes its
connection, which is how SGLang learns that a stream's client has gone; one that arrived whole
goes back to the pool. A request that fails on a reused keep-alive connection before any
response byte arrives (the server closed it while idle) is sent once more on a new connection."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator

import httptools
import httpx

IDLE_EXPIRY_S = 4.0  # under uvicorn's 5 s keep-alive: the server should not close it first
MAX_IDLE = 64
_HIGH_WATER = 256 * 1024  # buffered body bytes before the socket stops being read


class _Connection(asyncio.Protocol):
    """One upstream connection: parses responses, one at a time, into a queue of body chunks."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.reused = False
        self.idle_since = 0.0
        self.origin: tuple[str, int] = ("", 0)
        self._waiter: asyncio.Future | None = None
        self.begin()

    def begin(self) -> None:
        """Fresh per-response state, before each request."""
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.framed = False  # Content-Length or chunked: the end is known without a close
        self.received = False
        self.error: httpx.TransportError | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False

    # asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self.error = httpx.RemoteProtocolError(f"upstream sent invalid HTTP: {e}")
            self.close()
        self._wake()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.headers_done and not self.complete and not self.framed:
            self.complete = True  # a close-delimited body ends with the connection
        elif not self.complete and self.error is None:
            what = "a complete response" if self.headers_done else "a response"
            self.error = httpx.RemoteProtocolError(f"upstream closed the connection before {what}")
        self._wake()

    # httptools callbacks -----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        lowered = name.lower()
        if lowered == b"content-length" or (
            lowered == b"transfer-encoding" and b"chunked" in value.lower()
        ):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        self.complete = True

    # waiting -----------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self, timeout: float | None, request: httpx.Request) -> None:
        """Until the next bytes, close or error; httpx.ReadTimeout after `timeout` seconds."""
        fut = self._waiter = self.loop.create_future()
        timer = None
        if timeout is not None:
            timer = self.loop.call_later(timeout, _expire, fut, request)
        try:
            await fut
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def take(self) -> bytes:
        chunk = self.chunks.popleft()
        self.buffered -= len(chunk)
        if self.paused and self.buffered <= _HIGH_WATER // 2 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return chunk

    def discard_body(self) -> None:
        self.chunks.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.closed = True


def _expire(fut: asyncio.Future, request: httpx.Request) -> None:
    if not fut.done():
        fut.set_exception(httpx.ReadTimeout("upstream sent nothing in time", request=request))


class _Body(httpx.AsyncByteStream):
    """A response body as it arrives; when the reader is done with it, the connection goes back
    to the pool if the whole response has arrived, and is closed if not."""

    def __init__(self, pool: H1Transport, conn: _Connection, request: httpx.Request) -> None:
        self._pool, self._conn, self._request = pool, conn, request
        self._timeout = request.extensions.get("timeout", {}).get("read")
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        try:
            while True:
                while conn.chunks:
                    yield conn.take()
                if conn.complete:
                    break
                if conn.error is not None:
                    raise _with_request(conn.error, self._request)
                await conn.wait(self._timeout, self._request)
        finally:
            self._finish()

    def _finish(self) -> None:
        """Back to the pool if the response arrived whole (what the reader skipped of it is
        dropped), else closed: a half-read response would corrupt the next one."""
        if not self._done:
            self._done = True
            conn = self._conn
            if conn.complete and conn.error is None:
                conn.discard_body()
                self._pool.release(conn, True)
            else:
                self._pool.release(conn, False)

    async def aclose(self) -> None:
        self._finish()


def _with_request(exc: httpx.TransportError, request: httpx.Request) -> httpx.TransportError:
    out = type(exc)(str(exc), request=request)
    out.__cause__ = exc.__cause__
    return out


def _serialize(request: httpx.Request, body: bytes) -> bytes:
    lines = [b"%s %s HTTP/1.1\r\n" % (request.method.encode(), request.url.raw_path)]
    chunked = False
    for name, value in request.headers.raw:
        if name.lower() == b"transfer-encoding":
            chunked = True
            continue  # the body is whole here: sent with a Content-Length instead
        lines.append(b"%s: %s\r\n" % (name, value))
    if chunked:
        lines.append(b"content-length: %d\r\n" % len(body))
    lines.append(b"\r\n")
    lines.append(body)
    return b"".join(lines)


class H1Transport(httpx.AsyncBaseTransport):
    def __init__(self, max_idle: int = MAX_IDLE, idle_expiry_s: float = IDLE_EXPIRY_S) -> None:
        self.max_idle = max_idle
        self.idle_expiry_s = idle_expiry_s
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self.opened = 0  # connections made, for tests and diagnostics

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"upstream {url.scheme}:// is not supported: the provider speaks plain HTTP/1.1 "
                "to a local SGLang server or router",
                request=request,
            )
        try:
            body = request.content
        except httpx.RequestNotRead:
            body = await request.aread()
        data = _serialize(request, body)
        origin = (url.host, url.port or 80)
        timeouts = request.extensions.get("timeout", {})
        conn = self._pop_idle(origin)
        if conn is None:
            conn = await self._connect(origin, timeouts.get("connect"), request)
        try:
            try:
                await self._exchange(conn, data, timeouts.get("read"), request)
            except httpx.RemoteProtocolError:
                if not (conn.reused and not conn.received):
                    raise
                # The server dropped an idle keep-alive connection: nothing was processed.
                conn.close()
                conn = await self._connect(origin, timeouts.get("connect"), request)
                await self._exchange(conn, data, timeouts.get("read"), request)
        except BaseException:
            conn.close()
            raise
        return httpx.Response(
            conn.status,
            headers=conn.headers,
            stream=_Body(self, conn, request),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def _exchange(
        self, conn: _Connection, data: bytes, timeout: float | None, request: httpx.Request
    ) -> None:
        conn.begin()
        if conn.closed:
            raise httpx.RemoteProtocolError("connection closed", request=request)
        conn.transport.write(data)  # type: ignore[union-attr]
        while not conn.headers_done:
            if conn.error is not None:
                raise _with_request(conn.error, request)
            await conn.wait(timeout, request)

    async def _connect(
        self, origin: tuple[str, int], timeout: float | None, request: httpx.Request
    ) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(loop), origin[0], origin[1]), timeout
            )
        except (TimeoutError, asyncio.TimeoutError) as e:
            raise httpx.ConnectTimeout(f"connecting to {origin} timed out", request=request) from e
        except OSError as e:
            raise httpx.ConnectError(f"cannot connect to {origin}: {e}", request=request) from e
        conn.origin = origin
        self.opened += 1
        return conn

    def _pop_idle(self, origin: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < self.idle_expiry_s:
                conn.reused = True
                return conn
            conn.close()
        return None

    def release(self, conn: _Connection, reusable: bool) -> None:
        if not reusable or conn.closed or not conn.keep_alive or conn.chunks:
            conn.close()
            return
        idle = self._idle.setdefault(conn.origin, [])
        if len(idle) >= self.max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
