"""The provider's core, shared by its two services (`openai_service`, `native_service`):
keys (authenticate), rate limits (admit), the ledger rows of one request with their spend
reservation (start_rows) and billing (finish), upstream health.

The store is the embedded SQLite file or the shared PostgreSQL (`--db postgresql://...`). On the
shared store the rate windows, spend reservations and ledger are the database's, so several
replicas enforce one limit per key, and start-up recovery settles only dead replicas' rows
(`replicas.ReplicaLease`); a database that cannot be reached is a 503 at admission, and a
settlement it missed is retried until it lands."""

from __future__ import annotations

import asyncio
import time
import uuid

from starlette.requests import Request

from sglang_mx.provider.context import RequestContext
from sglang_mx.provider.db import open_database
from sglang_mx.provider.errors import ProviderError, StoreUnavailable, unauthorized
from sglang_mx.provider.guards import UpstreamGuard
from sglang_mx.provider.keys import ApiKey, KeyStore
from sglang_mx.provider.ledger import Ledger
from sglang_mx.provider.pricing import ModelPricing, load_pricing
from sglang_mx.provider.prometheus import ProviderMetrics
from sglang_mx.provider.ratelimit import RateLimiter, SharedRateLimiter
from sglang_mx.provider.reserve import worst_case_usd
from sglang_mx.provider.settings import ProviderSettings
from sglang_mx.provider.upstream import Upstream
from sglang_mx.provider.usage import TokenCounts


class Provider:
    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self.models: dict[str, ModelPricing] = load_pricing(settings.pricing_path)
        self.lease = None
        if settings.shared_store:
            db = open_database(settings.db_path, synchronous_commit=settings.db_sync_commit)
            self.keys, self.ledger = KeyStore(db), Ledger(db)
            self.limiter: RateLimiter | SharedRateLimiter = SharedRateLimiter(db)
        else:
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
        if settings.shared_store:
            from sglang_mx.provider.replicas import ReplicaLease

            self.lease = ReplicaLease(
                str(settings.db_path),
                settings.port,
                settings.replica_lease_s,
                self._cost_of,
                settings.db_sync_commit,
            )
            self.recovered = self.lease.start()  # only rows of replicas known dead
        else:
            self.recovered = self.ledger.recover(self._cost_of)

    def _cost_of(self, model_id: str, prompt: int, completion: int, cached: int) -> float:
        model = self.models.get(model_id)
        return model.cost(prompt, completion, cached) if model else 0.0

    async def close(self) -> None:
        await self.upstream.close()
        self.ledger.db.stop_checkpointer()  # requests still finishing can write the ledger
        if self.lease is not None:
            self.lease.stop()

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
        key = self.keys.lookup(plain)  # StoreUnavailable: a 503
        if len(self._key_cache) > 10_000:  # bounded: random bad keys cannot grow it forever
            self._key_cache.clear()
        self._key_cache[plain] = (now, key)
        return key

    def spent(self, key_id: str) -> float:
        """USD a key has spent, as the provider reports it: the sum of its ledger rows. On the
        shared store read from the database on each call, so every replica answers the same;
        on the embedded store (one process) as `_spent_cached`."""
        if self.settings.shared_store:
            return self.ledger.spend(key_id)
        return self._spent_cached(key_id)

    def _spent_cached(self, key_id: str) -> float:
        """Summed from the ledger at most every key_cache_ttl_s (the sum scans the key's rows)
        and advanced in memory by each request this process bills: admission's early refusal
        of a key already at its cap. The cap itself is held by start_rows' reservation."""
        now = time.monotonic()
        hit = self._spend.get(key_id)
        if hit is None or now - hit[0] >= self.settings.key_cache_ttl_s:
            # shared store: the balance row, not a scan of the key's rows
            spent = self.ledger.balance(key_id)[0] if self.lease else self.ledger.spend(key_id)
            hit = (now, spent)
            self._spend[key_id] = hit
        return hit[1]

    def admit(self, key: ApiKey, count: int = 1) -> None:
        """Rate limits, and an early refusal of a key already at its spend cap; `count`
        requests at once (a native batch's outputs). The cap is held by start_rows."""
        rpm, tpm = self._limits(key, count)
        self._rate_limited(rpm, tpm, self.limiter.acquire(key.id, rpm, tpm, count))

    def admit_and_open(
        self, ctx: RequestContext, rows: list[str], body: dict | None, count: int = 1
    ) -> None:
        """`admit` then `start_rows`; on the shared store one round trip (`mx_admit_open`)."""
        if not self.settings.shared_store:
            self.admit(ctx.key, count)
            self.start_rows(ctx, rows, body)
            return
        rpm, tpm = self._limits(ctx.key, count)
        self.start_rows(ctx, rows, body, admission=(rpm, tpm, count))

    def _limits(self, key: ApiKey, count: int) -> tuple[int, int]:
        """The key's (requests, tokens) per minute, after the checks that need no store call:
        a 402 for a key already at its cap, a 429 for a batch larger than its minute."""
        if key.limit_usd is not None and self._spent_cached(key.id) >= key.limit_usd:
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
        return rpm, tpm

    @staticmethod
    def _rate_limited(rpm: int, tpm: int, wait: float) -> None:
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

    def start_rows(
        self,
        ctx: RequestContext,
        rows: list[str],
        body: dict | None = None,
        admission: tuple[int, int, int] | None = None,
    ) -> None:
        """Open the request's ledger rows (pending until `finish`), reserving its worst-case
        cost (from `body`, the upstream body; the model's maxima without one) against the key's
        cap: a 402 when spent + reserved in flight + this would pass it, nothing written.
        `admission` (rpm, tpm, requests), shared store only: admitted in the same call first."""
        key, model = ctx.key, ctx.model
        worst = 0.0
        if key.limit_usd is not None:
            worst = self._worst_case(model, body, len(rows))
        replica = self.lease.id if self.lease is not None else None
        try:
            if admission is None:
                refused = self.ledger.open(
                    rows, key.id, model.id, worst / len(rows), key.limit_usd, replica
                )
            else:
                wait, refused = self.ledger.admit_open(
                    admission, rows, key.id, model.id, worst / len(rows), key.limit_usd, replica
                )
                self._rate_limited(admission[0], admission[1], wait)
        except StoreUnavailable:
            # A 503. Its commit may still have landed (the reply lost with the connection):
            # close such rows, unbilled, once the database answers again.
            if self.lease is not None:
                for row in rows:
                    self.lease.retries.append(lambda ledger, row=row: ledger.finish(
                        row, "error", 0, 0, 0, 0.0, "database lost while the request opened"
                    ))  # fmt: skip
            raise
        if refused is not None:
            spent, held = refused
            raise ProviderError(
                402,
                f"key {key.id}: this request may cost up to {worst:.6f} USD; with {spent:.6f} "
                f"spent and {held:.6f} held by requests in flight it would pass the key's "
                f"{key.limit_usd} USD limit (lower max_tokens, or wait for requests to finish)",
                "insufficient_credits",
                metadata={"spent_usd": spent, "in_flight_usd": held, "request_max_usd": worst},
            )
        ctx.rows = rows
        ctx.counts = [TokenCounts() for _ in rows]

    @staticmethod
    def _worst_case(model: ModelPricing, body: dict | None, rows: int) -> float:
        if body is None:  # nothing to bound the prompt by: a full context per output
            fees = float(model.per_token("request")) * (rows - 1)
            prompt, completion = model.context_length * rows, model.max_completion_tokens * rows
            return model.cost(prompt, completion, 0) + fees
        params = body.get("sampling_params")
        params = params if isinstance(params, dict) else {}
        max_new = body.get("max_tokens", params.get("max_new_tokens"))
        if not isinstance(max_new, int) or max_new < 0:
            max_new = model.max_completion_tokens
        n = params.get("n", 1)
        prompts = max(1, rows // n) if isinstance(n, int) and n > 0 else rows
        return worst_case_usd(model, body, rows, prompts, max_new)

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
        args = (row, status, counts.prompt, counts.completion, counts.cached, cost, error)
        stats = ctx.stats if ctx.stats is not None and ctx.stats.id == row else None
        try:
            settled = self.ledger.finish(*args, stats=stats)
        except StoreUnavailable:
            # The row stays pending with its reservation until the lease thread lands this.
            if self.lease is not None:
                self.lease.retries.append(lambda ledger: ledger.finish(*args, stats=stats))
            return
        if settled:
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
        try:
            for row, c in zip(ctx.rows, ctx.counts, strict=True):
                self.ledger.progress(row, c.prompt, c.completion, c.cached)
        except StoreUnavailable:
            pass  # best effort: the stream goes on; a crash now bills the last counts written

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
