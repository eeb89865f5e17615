"""HTTP client to the upstream (an SGLang server or sglang-router): JSON calls, SSE streams,
best-effort aborts, and failures mapped to provider errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from sglang_mx.provider import jsonio
from sglang_mx.provider.errors import ProviderError, upstream_unavailable
from sglang_mx.provider.h1 import H1Transport

_JSON = {"content-type": "application/json"}


def _upstream_error(status: int, text: str) -> ProviderError:
    """Map an upstream HTTP error to the status a client should see."""
    try:
        detail = json.loads(text)
        msg = detail.get("message") or detail.get("error", {}).get("message") or text
    except (ValueError, AttributeError):
        msg = text
    msg = str(msg)[:500]
    if status in (400, 413, 422):
        lowered = msg.lower()
        if "duplicate request id" in lowered:
            # the id is ours, fresh per request: an earlier attempt of this request is still
            # upstream (a gateway retrying after a fault), not the client's doing
            return upstream_unavailable(f"upstream still holds this request: {msg}", 502)
        if "context length" in lowered or "longer than" in lowered or "too long" in lowered:
            return ProviderError(413, f"prompt too long: {msg}", "context_length_exceeded")
        return ProviderError(400, msg, "upstream_rejected")
    if status == 429:
        return ProviderError(
            503,
            "upstream overloaded, retry shortly",
            "upstream_overloaded",
            headers={"Retry-After": "1"},
        )
    if status == 503:
        return upstream_unavailable(f"upstream unavailable: {msg}", 503)
    return upstream_unavailable(f"upstream failed with HTTP {status}: {msg}", 502)


def _transport_error(e: httpx.TransportError) -> ProviderError:
    if isinstance(e, httpx.TimeoutException):
        return ProviderError(502, f"upstream timed out ({type(e).__name__})", "upstream_timeout")
    return upstream_unavailable(f"upstream unreachable: {type(e).__name__}")


class Upstream:
    def __init__(self, base_url: str, connect_timeout_s: float, read_timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
        self._extensions = {"timeout": timeout.as_dict()}
        self._urls: dict[str, httpx.URL] = {}  # parsed once per path (~40 us a request)
        self.transport = H1Transport()  # httpx's API on a lighter wire layer (h1.py)
        # trust_env=False: no proxy/netrc lookups per request; the upstream is a local URL.
        self.client = httpx.AsyncClient(
            base_url=base_url, timeout=timeout, transport=self.transport, trust_env=False
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def _open(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST straight to the client's transport (same pool): the provider's calls need none
        of the client's per-request work (URL merging, cookies, auth, redirects, event hooks).
        Returns with the headers read; the body is the caller's to read and close."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self.base_url + path)
        req = httpx.Request(
            "POST",
            url,
            content=jsonio.dumps(body),
            headers=_JSON,
            extensions=self._extensions,
        )
        try:
            return await self.transport.handle_async_request(req)
        except httpx.TransportError as e:
            raise _transport_error(e) from e

    async def post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self._open(path, body)
        try:
            await resp.aread()
        except httpx.TransportError as e:
            raise _transport_error(e) from e
        finally:
            await resp.aclose()
        if resp.status_code != 200:
            raise _upstream_error(resp.status_code, resp.text)
        try:
            return jsonio.loads(resp.content)
        except ValueError as e:
            raise upstream_unavailable("upstream sent invalid JSON") from e

    @asynccontextmanager
    async def stream(self, path: str, body: dict[str, Any]) -> AsyncIterator[httpx.Response]:
        """Open an SSE stream; errors before the first byte raise ProviderError."""
        resp = await self._open(path, body)
        try:
            if resp.status_code != 200:
                try:
                    text = (await resp.aread()).decode(errors="replace")
                except httpx.HTTPError as e:
                    text = f"(body unreadable: {type(e).__name__})"
                raise _upstream_error(resp.status_code, text)
            yield resp
        finally:
            await resp.aclose()

    async def abort(self, rid: str) -> None:
        """Ask the upstream to drop `rid` (frees its KV); routers without the route ignore it."""
        try:
            await self.client.post("/abort_request", json={"rid": rid}, timeout=2.0)
        except httpx.HTTPError:
            pass

    async def probe(self) -> bool:
        """Generate one token: live, not just listening."""
        body = {"text": "ping", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
        try:
            resp = await self.client.post("/generate", json=body, timeout=30.0)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200
