"""Reading one HTTP/1.1 request off an asyncio stream, for scripted servers that write exact
bytes back (benchmark/null_upstream.py, the provider transport's tests)."""

from __future__ import annotations

import asyncio


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head including the blank line, body of Content-Length bytes); IncompleteReadError at
    end of stream."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head, (await reader.readexactly(length) if length else b"")
