"""The provider's core, shared by its two services (`openai_service`, `native_service`):
keys (authenticate), spend and rate limits (admit), the ledger rows of one request and their
billing (finish), upstream health."""

from __future__ import annotations

import asyncio
import time
import uuid

from starlette.requests import Request

from sglang_mx.provider.context import RequestContext
from sglang_mx.provider.errors import ProviderError, unauthorized
from sglang_mx.provider.guards import UpstreamGuard
from sglang_mx.provider.keys import ApiKey, KeyStore
from sglang_mx.provider.ledger import Ledger
from sglang_mx.provider.metrics import ProviderMetrics
from sglang_mx.provider.pricing import ModelPricing, load_pricing
from sglang_mx.provider.ratelimit import RateLimiter
from sglang_mx.provider.settings import ProviderSettings
from sglang_mx.provider.upstream import Upstream
from sglang_mx.provider.usage import TokenCounts


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

    # --- one request --------------------------------------------------------------------------

    def new_context(self, key: ApiKey, model: ModelPricing, endpoint: str) -> RequestContext:
        """A fresh request id, and the key's cache namespace when isolation is on."""
        salt = self.keys.cache_salt(key.id) if self.isolation_active() else None
        return RequestContext(f"gen-{uuid.uuid4().hex}", key, model, endpoint, salt)

    def start_rows(self, ctx: RequestContext, rows: list[str]) -> None:
        """Open the request's ledger rows (pending until `finish`)."""
        ctx.rows = rows
        ctx.counts = [TokenCounts() for _ in rows]
        for row in rows:
            self.ledger.start(row, ctx.key.id, ctx.model.id)

    def finish(
        self, ctx: RequestContext, status: str, error: str | None = None, zero: bool = False
    ) -> None:
        """Close every ledger row of `ctx` (with zero tokens when `zero`), once: a row already
        finished is not billed again."""
        for row, counts in zip(ctx.rows, ctx.counts, strict=True):
            self._finish_row(ctx, row, TokenCounts() if zero else counts, status, error)

    def _finish_row(
        self, ctx: RequestContext, row: str, counts: TokenCounts, status: str, error: str | None
    ) -> None:
        model, key = ctx.model, ctx.key
        cost = counts.cost(model)
        if self.ledger.finish(
            row, status, counts.prompt, counts.completion, counts.cached, cost, error
        ):
            self.limiter.add_tokens(key.id, counts.prompt + counts.completion)
            hit = self._spend.get(key.id)
            if hit is not None:
                self._spend[key.id] = (hit[0], hit[1] + cost)
            self.metrics.record_usage(
                model.id, counts.prompt, counts.completion, counts.cached, cost
            )
            self.metrics.requests.labels(model.id, ctx.endpoint, status).inc()

    def progress(self, ctx: RequestContext) -> None:
        """Write the counts so far, so a crash bills what was produced up to here."""
        for row, c in zip(ctx.rows, ctx.counts, strict=True):
            self.ledger.progress(row, c.prompt, c.completion, c.cached)

    def abort_upstream(self, ctx: RequestContext) -> None:
        """Client gone: tell SGLang to free the requests' KV now, not at the next token."""
        for row in ctx.rows:  # `n` > 1 gets fresh rids upstream: the closed connection aborts
            asyncio.ensure_future(self.upstream.abort(row))

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
