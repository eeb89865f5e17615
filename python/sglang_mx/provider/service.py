"""The provider's request path: authenticate, validate, limit, record in the ledger, call the
upstream, bill. Streaming responses are relayed by `relay.py`."""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import AsyncExitStack
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglang_mx.provider import jsonio
from sglang_mx.provider.errors import ProviderError, unauthorized
from sglang_mx.provider.guards import UpstreamGuard
from sglang_mx.provider.keys import ApiKey, KeyStore
from sglang_mx.provider.ledger import Ledger
from sglang_mx.provider.metrics import ProviderMetrics
from sglang_mx.provider.native_service import NativeService
from sglang_mx.provider.pricing import ModelPricing, load_pricing
from sglang_mx.provider.ratelimit import RateLimiter
from sglang_mx.provider.relay import StreamRelay
from sglang_mx.provider.settings import ProviderSettings
from sglang_mx.provider.sse_response import EventStreamResponse
from sglang_mx.provider.upstream import Upstream
from sglang_mx.provider.usage import TokenCounts
from sglang_mx.provider.validation import (
    ParsedRequest,
    parse_json,
    validate_chat,
    validate_completion,
)

ENDPOINTS = {
    "chat": ("/v1/chat/completions", validate_chat),
    "completions": ("/v1/completions", validate_completion),
}
_DISCONNECT_POLL_S = 0.25


class Provider:
    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self.models: dict[str, ModelPricing] = load_pricing(settings.pricing_path)
        self.keys = KeyStore(settings.db_path)
        self.ledger = Ledger(settings.db_path, background_checkpoint=True)
        self.limiter = RateLimiter()
        self.metrics = ProviderMetrics()
        self.upstream = Upstream(
            settings.upstream, settings.connect_timeout_s, settings.read_timeout_s
        )
        self.guard = UpstreamGuard(self.upstream)  # vocabulary/context limits of the upstream
        self._health: tuple[float, bool] = (0.0, False)
        self._health_lock = asyncio.Lock()
        self._key_cache: dict[str, tuple[float, ApiKey | None]] = {}
        self._active_keys: tuple[float, int] = (float("-inf"), 0)
        self._spend: dict[str, tuple[float, float]] = {}  # key id -> (read at, USD spent)
        self.recovered = self.ledger.recover(self._cost_of)
        self.native = NativeService(self)  # SGLang's native routes for sgl.RuntimeEndpoint

    def _cost_of(self, model_id: str, prompt: int, completion: int, cached: int) -> float:
        model = self.models.get(model_id)
        return model.cost(prompt, completion, cached) if model else 0.0

    async def close(self) -> None:
        await self.upstream.close()
        self.ledger.db.stop_checkpointer()  # requests still finishing can write the ledger

    # --- admission -------------------------------------------------------------------------

    def authenticate(self, request: Request) -> ApiKey:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise unauthorized("missing API key: send `Authorization: Bearer <key>`", "missing_key")
        key = self._lookup(token.strip())
        if key is None:
            raise unauthorized("invalid API key", "invalid_key")
        if not key.active:
            raise unauthorized("API key revoked", "revoked_key")
        return key

    def _lookup(self, plain: str) -> ApiKey | None:
        """Key record, re-read from SQLite at most every key_cache_ttl_s (revocations made by
        `sglang-mx keys revoke` in another process apply within that time)."""
        now = time.monotonic()
        hit = self._key_cache.get(plain)
        if hit is not None and now - hit[0] < self.settings.key_cache_ttl_s:
            return hit[1]
        key = self.keys.lookup(plain)
        if len(self._key_cache) > 10_000:  # bounded: random bad keys cannot grow it forever
            self._key_cache.clear()
        self._key_cache[plain] = (now, key)
        return key

    def spent(self, key_id: str) -> float:
        """USD a key has spent: summed from the ledger at most every key_cache_ttl_s (the sum
        scans the key's rows) and advanced in memory by each request this process bills."""
        now = time.monotonic()
        hit = self._spend.get(key_id)
        if hit is None or now - hit[0] >= self.settings.key_cache_ttl_s:
            hit = (now, self.ledger.spend(key_id))
            self._spend[key_id] = hit
        return hit[1]

    def admit(self, key: ApiKey, count: int = 1) -> None:
        """Spend and rate limits; `count` requests at once (a native batch's outputs)."""
        if key.limit_usd is not None and self.spent(key.id) >= key.limit_usd:
            raise ProviderError(
                402, f"key {key.id} has spent its {key.limit_usd} USD limit", "insufficient_credits"
            )
        rpm = key.rpm if key.rpm is not None else self.settings.default_rpm
        tpm = key.tpm if key.tpm is not None else self.settings.default_tpm
        if count > rpm:
            raise ProviderError(
                429,
                f"{count} outputs in one request exceed this key's {rpm} requests/min; send "
                "smaller batches",
                "rate_limited",
            )
        wait = self.limiter.acquire(key.id, rpm, tpm, count)
        if wait:
            raise ProviderError(
                429,
                f"rate limit exceeded ({rpm} requests/min, {tpm} tokens/min); retry in "
                f"{int(wait)} s",
                "rate_limited",
                headers={"Retry-After": str(int(wait))},
                metadata={"retry_after_s": int(wait)},
            )

    def isolation_active(self) -> bool:
        if self.settings.isolation == "auto":
            now = time.monotonic()
            if now - self._active_keys[0] >= self.settings.key_cache_ttl_s:
                self._active_keys = (now, self.keys.active_count())
            return self._active_keys[1] > 1
        return self.settings.isolation == "on"

    # --- completions -----------------------------------------------------------------------

    async def handle(self, request: Request, endpoint: str) -> Response | EventStreamResponse:
        path, validate = ENDPOINTS[endpoint]
        key = self.authenticate(request)
        parsed = validate(parse_json(await request.body()), self.models)
        self.guard.check(parsed.upstream_body)
        self.admit(key)
        rid = f"gen-{uuid.uuid4().hex}"
        body = dict(parsed.upstream_body, rid=rid)
        if self.isolation_active():
            body["cache_salt"] = self.keys.cache_salt(key.id)
        self.ledger.start(rid, key.id, parsed.model.id)
        if parsed.stream:
            return await self._stream(request, endpoint, path, body, parsed, key, rid)
        return await self._unary(request, endpoint, path, body, parsed, key, rid)

    def finish(
        self,
        rid: str,
        key: ApiKey,
        parsed: ParsedRequest,
        endpoint: str,
        status: str,
        counts: TokenCounts,
        error: str | None = None,
    ) -> float:
        cost = counts.cost(parsed.model)
        if self.ledger.finish(
            rid, status, counts.prompt, counts.completion, counts.cached, cost, error
        ):
            self.limiter.add_tokens(key.id, counts.prompt + counts.completion)
            hit = self._spend.get(key.id)
            if hit is not None:
                self._spend[key.id] = (hit[0], hit[1] + cost)
            self.metrics.record_usage(
                parsed.model.id, counts.prompt, counts.completion, counts.cached, cost
            )
            self.metrics.requests.labels(parsed.model.id, endpoint, status).inc()
        return cost

    async def _unary(
        self,
        request: Request,
        endpoint: str,
        path: str,
        body: dict[str, Any],
        parsed: ParsedRequest,
        key: ApiKey,
        rid: str,
    ) -> Response:
        t0 = time.perf_counter()
        call = asyncio.ensure_future(self.upstream.post_json(path, body))
        # A client that leaves must not keep the upstream generating: watch for the disconnect.
        while not call.done():
            await asyncio.wait({call}, timeout=_DISCONNECT_POLL_S)
            if not call.done() and await request.is_disconnected():
                call.cancel()
                asyncio.ensure_future(self.upstream.abort(rid))
                self.finish(rid, key, parsed, endpoint, "aborted", TokenCounts(), "client left")
                return Response(status_code=499)
        try:
            data = call.result()
        except Exception as e:  # every request leaves the ledger finalized, whatever failed
            self.finish(rid, key, parsed, endpoint, "error", TokenCounts(), str(e)[:500])
            raise
        counts = TokenCounts()
        counts.update(data.get("usage"))
        self.metrics.ttft.labels(parsed.model.id).observe(time.perf_counter() - t0)
        self.finish(rid, key, parsed, endpoint, "ok", counts)
        data["usage"] = counts.billed(parsed.model)
        data["model"] = parsed.model.id
        data["id"] = rid
        data["provider"] = "sglang-mx"
        return Response(
            jsonio.dumps(data), media_type="application/json", headers={"X-Request-Id": rid}
        )

    async def _stream(
        self,
        request: Request,
        endpoint: str,
        path: str,
        body: dict[str, Any],
        parsed: ParsedRequest,
        key: ApiKey,
        rid: str,
    ) -> EventStreamResponse:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        stack = AsyncExitStack()
        opening = asyncio.ensure_future(stack.enter_async_context(self.upstream.stream(path, body)))
        # Refusals that come quickly (upstream down, bad request) keep their HTTP status; a slow
        # upstream gets an SSE response at once, with keep-alives until it answers.
        await asyncio.wait({opening}, timeout=self.settings.keepalive_s)
        if opening.done() and opening.exception() is not None:
            await stack.aclose()
            exc = opening.exception()
            self.finish(rid, key, parsed, endpoint, "error", TokenCounts(), str(exc))
            raise exc
        relay = StreamRelay(self, stack, opening, rid, key, parsed, endpoint)
        return EventStreamResponse(
            relay.events(),
            headers={"X-Request-Id": rid, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    # --- health ----------------------------------------------------------------------------

    async def healthy(self) -> bool:
        """One generated token upstream, cached for health_ttl_s; one probe at a time."""
        async with self._health_lock:
            checked, ok = self._health
            if time.monotonic() - checked < self.settings.health_ttl_s:
                return ok
            ok = await self.upstream.probe()
            self._health = (time.monotonic(), ok)
            return ok
