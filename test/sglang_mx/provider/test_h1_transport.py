"""The provider's httpx transport (provider/h1.py) against scripted HTTP servers on real
loopback sockets: keep-alive, framing, streaming, flow control, failures and cancellation.

The servers are raw asyncio sockets that write exactly the bytes each case needs, including
broken ones no real server would send on purpose."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from sglang_mx.provider.h1 import H1Transport
from sglang_mx_lab.testing.rawhttp import read_request

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"  # a response head


def chunk(*pieces: bytes, last: bool = False) -> bytes:
    """`pieces` in HTTP/1.1 chunked framing, plus the terminating zero chunk when `last`."""
    framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return framed + (b"0\r\n\r\n" if last else b"")


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n" % (len(body), extra) + body


class Server:
    """Runs `handler` per connection; records connections and what each request carried."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[tuple[bytes, bytes]] = []
        self.eof = asyncio.Event()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{self.port}"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: bytes) -> None:
    """Read one request, then write `reply` and flush it (a scripted server's turn)."""
    await read_request(reader)
    writer.write(reply)
    await writer.drain()


def in_loop(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """An async test run to completion in a fresh event loop, 30 s at most."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), 30))

    return run


def client(base: str, transport: H1Transport, read_s: float = 10.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base, transport=transport, timeout=httpx.Timeout(read_s, connect=5.0)
    )


@contextlib.asynccontextmanager
async def connect(srv: Server, read_s: float = 10.0) -> AsyncIterator[tuple[H1Transport, Any]]:
    """`srv` listening, and a client on a fresh H1Transport to it; both close on exit."""
    async with srv as base:
        t = H1Transport()
        async with client(base, t, read_s) as c:
            yield t, c


@in_loop
async def test_keep_alive_reuses_one_connection_and_sends_the_request_intact():
    srv = Server(None)  # type: ignore[arg-type]

    async def handler(reader, writer):
        while True:
            head, body = await read_request(reader)
            srv.requests.append((head, body))
            writer.write(ok(b"echo:" + body))

    srv.handler = handler
    async with connect(srv) as (t, c):
        for i in range(5):
            r = await c.post("/v1/completions?x=1", content=b'{"n": %d}' % i)
            assert r.status_code == 200
            assert r.content == b'echo:{"n": %d}' % i
    assert t.opened == 1 and srv.connections == 1
    head = srv.requests[0][0]
    assert head.startswith(b"POST /v1/completions?x=1 HTTP/1.1\r\n")
    assert b"content-length: 8" in head.lower() and b"host: 127.0.0.1" in head.lower()


@in_loop
async def test_chunked_body_streams_as_it_arrives():
    release = asyncio.Event()

    async def handler(reader, writer):
        await answer(reader, writer, CHUNKED + chunk(b"data:1"))
        await release.wait()  # the client must see the first chunk before the rest exists
        writer.write(chunk(b"data:2", last=True))
        await writer.drain()
        await reader.read()

    async with connect(Server(handler)) as (t, c):
        async with c.stream("POST", "/s", content=b"{}") as r:
            got = []
            async for piece in r.aiter_bytes():
                got.append(piece)
                release.set()
        assert b"".join(got) == b"data:1data:2"
        assert len(got) >= 2
        # read to its end: the connection went back to the pool
        assert sum(len(v) for v in t._idle.values()) == 1


@in_loop
async def test_close_delimited_body_and_connection_close_are_not_reused():
    async def handler(reader, writer):
        await answer(reader, writer, b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil-the-end")
        writer.close()

    srv = Server(handler)
    async with connect(srv) as (t, c):
        assert (await c.post("/", content=b"a")).content == b"until-the-end"
        assert (await c.post("/", content=b"b")).content == b"until-the-end"
    assert t.opened == 2 and srv.connections == 2


@in_loop
async def test_idle_connection_closed_by_server_is_retried_once_on_a_new_one():
    async def handler(reader, writer):
        await answer(reader, writer, ok(b"first"))
        # keep-alive promised, then dropped while idle (as an expiring server does)

    srv = Server(handler)
    async with connect(srv) as (t, c):
        assert (await c.post("/", content=b"1")).content == b"first"
        await asyncio.sleep(0)  # the close has not necessarily been seen yet
        assert (await c.post("/", content=b"2")).content == b"first"
    assert srv.connections == 2


@in_loop
async def test_stale_connection_race_retries_when_no_byte_came_back():
    count = 0

    async def handler(reader, writer):
        nonlocal count
        count += 1
        await answer(reader, writer, ok(b"r%d" % count))
        if count == 1:
            await reader.read(1)  # the second request arrives: drop it unanswered
            return
        await reader.read()

    async with connect(Server(handler)) as (t, c):
        assert (await c.post("/", content=b"1")).content == b"r1"
        assert (await c.post("/", content=b"2")).content == b"r2"
    assert t.opened == 2


# An upstream's broken reply to a request on a fresh connection (bytes it sends, whether it then
# waits for the client to close) and what the client's error must say.
BROKEN_REPLIES = {
    # closing mid-body is a transport error, not a short body
    "closes-mid-body": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly-part",
        False,
        "complete response",
    ),
    "closes-before-any-response": (b"", False, "before a response"),
    "answers-invalid-http": (b"SMTP ready\r\n\r\n", True, "invalid HTTP"),
}


@pytest.mark.parametrize("case", list(BROKEN_REPLIES))
@in_loop
async def test_a_broken_reply_on_a_new_connection_is_a_protocol_error(case):
    reply, wait_for_close, match = BROKEN_REPLIES[case]

    async def handler(reader, writer):
        await answer(reader, writer, reply)
        if wait_for_close:
            await reader.read()

    async with connect(Server(handler)) as (t, c):
        with pytest.raises(httpx.RemoteProtocolError, match=match):
            await c.post("/", content=b"x")
    assert t.opened == 1  # a fresh connection is not retried: the server saw it


@in_loop
async def test_connect_refused_and_unsupported_scheme():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    async with client(f"http://127.0.0.1:{port}", H1Transport()) as c:
        with pytest.raises(httpx.ConnectError):
            await c.post("/", content=b"x")
    async with client("https://127.0.0.1:1", H1Transport()) as c:
        with pytest.raises(httpx.UnsupportedProtocol, match="plain HTTP"):
            await c.post("/", content=b"x")


@in_loop
async def test_read_timeout_raises_and_the_connection_is_dropped():
    async def handler(reader, writer):
        await read_request(reader)
        await reader.read()  # never answers; returns when the client closes

    srv = Server(handler)
    async with connect(srv, read_s=0.3) as (t, c):
        with pytest.raises(httpx.ReadTimeout):
            await c.post("/", content=b"x")
    assert not t._idle.get(("127.0.0.1", srv.port))


@in_loop
async def test_leaving_a_stream_early_closes_the_connection_so_the_server_sees_it():
    server_saw_close = asyncio.Event()

    async def handler(reader, writer):
        await answer(reader, writer, CHUNKED + chunk(b"first"))
        if await reader.read() == b"":
            server_saw_close.set()

    async with connect(Server(handler)) as (t, c):
        async with c.stream("POST", "/", content=b"{}") as r:
            async for piece in r.aiter_bytes():
                assert piece == b"first"
                break
    await asyncio.wait_for(server_saw_close.wait(), 5)
    assert not any(t._idle.values())


@in_loop
async def test_a_response_that_arrived_whole_is_reused_even_if_not_read_to_the_end():
    """The relay stops at `data: [DONE]`; the chunked terminator after it is already here."""

    async def handler(reader, writer):
        while True:
            await answer(reader, writer, CHUNKED + chunk(b"first", b"second", last=True))

    srv = Server(handler)
    async with connect(srv) as (t, c):
        for _ in range(3):
            async with c.stream("POST", "/", content=b"{}") as r:
                await asyncio.sleep(0.05)  # all of it has arrived
                async for piece in r.aiter_bytes():
                    assert piece.startswith(b"first")
                    break
    assert srv.connections == 1 and t.opened == 1


@in_loop
async def test_cancelled_request_closes_its_connection():
    server_saw_close = asyncio.Event()

    async def handler(reader, writer):
        await read_request(reader)
        if await reader.read() == b"":
            server_saw_close.set()

    async with connect(Server(handler)) as (t, c):
        task = asyncio.ensure_future(c.post("/", content=b"x"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(server_saw_close.wait(), 5)


@in_loop
async def test_large_body_passes_flow_control_intact():
    payload = bytes(range(256)) * (4 * 1024 * 8)  # 8 MiB: far past the 256 KiB high water

    async def handler(reader, writer):
        while True:
            await answer(reader, writer, ok(payload))

    srv = Server(handler)
    async with connect(srv) as (t, c):
        async with c.stream("POST", "/", content=b"{}") as r:
            seen = bytearray()
            async for piece in r.aiter_bytes():
                seen += piece
                await asyncio.sleep(0)  # a slow reader
        assert bytes(seen) == payload
        assert (await c.post("/", content=b"{}")).content == payload
    assert srv.connections == 1
