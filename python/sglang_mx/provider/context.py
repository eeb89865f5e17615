"""One request on its way through the provider: the `RequestContext` every step receives, and
`Settlement`, the narrow part of the provider that the upstream call and the relays use to
bill, flush and abort (they never see the `Provider` itself)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from sglang_mx.provider.generations import GenerationStats
from sglang_mx.provider.keys import ApiKey
from sglang_mx.provider.pricing import ModelPricing
from sglang_mx.provider.usage import TokenCounts


@dataclass
class RequestContext:
    """The key and model (with its prices) of one request, its id upstream, its ledger rows and
    their token counts (one row, or one per output of a native batch), the metrics label of its
    route, its per-key prefix-cache namespace, and when its upstream call began."""

    rid: str
    key: ApiKey
    model: ModelPricing
    endpoint: str  # metrics label: chat, completions or generate
    cache_salt: str | None = None
    rows: list[str] = field(default_factory=list)
    counts: list[TokenCounts] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)
    # the generation lookup's row, set by the relay before it settles; written with row 0
    stats: GenerationStats | None = None

    def upstream_body(self, body: dict) -> dict:
        """The validated body as the upstream gets it: our rid, and the key's cache namespace
        when prefix-cache isolation is on."""
        out = dict(body, rid=self.rid)
        if self.cache_salt is not None:
            out["cache_salt"] = self.cache_salt
        return out


class Settlement(Protocol):
    """What the upstream call and the relays need of the provider."""

    def finish(
        self, ctx: RequestContext, status: str, error: str | None = None, zero: bool = False
    ) -> None: ...

    def progress(self, ctx: RequestContext) -> None: ...

    def abort_upstream(self, ctx: RequestContext) -> None: ...
