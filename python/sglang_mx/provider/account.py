"""OpenRouter's account reads for the calling key, answered from the ledger and the key store:
`GET /api/v1/key` (label, cap, spend by UTC day/week/month) and `GET /api/v1/generation?id=`
(one request's tokens, cost and timing). A key reads only its own generations: another key's
id is answered exactly like an unknown one (404), so ids cannot be probed across tenants."""

from __future__ import annotations

import datetime as dt

from sglang_mx.provider.errors import ProviderError, bad_request
from sglang_mx.provider.generations import GenerationLog
from sglang_mx.provider.keys import ApiKey
from sglang_mx.provider.ledger import Ledger

PROVIDER_NAME = "sglang-mx"  # `provider` on every reply, `provider_name` in generation lookups
NO_CREDITS = (
    "this provider sells no prepaid credits: a key has a spend cap instead; its cap, spend and "
    "what remains are on GET /api/v1/key (limit, usage, limit_remaining)"
)


def spend_since(ledger: Ledger, key_id: str, since: float) -> float:
    """USD the key's ledger rows created at or after `since` (Unix time) were billed."""
    rows = ledger.db.execute(
        "SELECT COALESCE(SUM(cost), 0) FROM ledger WHERE key_id=? AND created>=?",
        (key_id, since),
    )
    return float(rows[0][0])


def period_starts(now: dt.datetime) -> dict[str, float]:
    """Unix starts of the current UTC day, week (from Monday) and month, as OpenRouter counts
    usage_daily, usage_weekly and usage_monthly."""
    day = now.astimezone(dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return {
        "usage_daily": day.timestamp(),
        "usage_weekly": (day - dt.timedelta(days=day.weekday())).timestamp(),
        "usage_monthly": day.replace(day=1).timestamp(),
    }


def key_info(ledger: Ledger, key: ApiKey, rpm: int, now: dt.datetime | None = None) -> dict:
    """The `data` of GET /api/v1/key for `key` (rpm: its effective requests per minute)."""
    usage = ledger.spend(key.id)
    limit = key.limit_usd
    periods = {
        name: spend_since(ledger, key.id, start)
        for name, start in period_starts(now or dt.datetime.now(dt.timezone.utc)).items()
    }
    return {
        "label": key.name,
        "limit": limit,
        "limit_remaining": None if limit is None else max(0.0, limit - usage),
        "limit_reset": None,  # a cap here never resets by itself
        "usage": usage,
        **periods,
        "byok_usage": 0.0,
        "byok_usage_daily": 0.0,
        "byok_usage_weekly": 0.0,
        "byok_usage_monthly": 0.0,
        "include_byok_in_limit": False,
        "is_free_tier": False,
        "is_management_key": False,
        "is_provisioning_key": False,
        "rate_limit": {
            "requests": rpm,
            "interval": "1m",
            "note": "requests per minute for this key; tokens per minute are limited too",
        },
        "free_model_daily_requests": {"limit": 0, "remaining": 0, "used": 0},
        "allowed_data_regions": ["global"],
        "budgets": [],
        "effective_budget": None,
        "creator_user_id": None,
        "organization_id": None,
        "workspace_id": None,
        "expires_at": None,
    }


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat()


def generation(ledger: Ledger, log: GenerationLog, key: ApiKey, gen_id: str | None) -> dict:
    """The `data` of GET /api/v1/generation?id= for one of `key`'s own finished requests."""
    if not gen_id:
        raise bad_request("`id` is required: GET /api/v1/generation?id=<generation id>")
    row = ledger.get(gen_id)
    if row is None or row.key_id != key.id:
        raise ProviderError(404, f"no generation {gen_id[:100]!r} for this key", "not_found")
    if row.status == "pending":
        raise ProviderError(
            404, f"generation {gen_id[:100]!r} is still running; ask again when it has finished",
            "generation_pending",
        )  # fmt: skip
    stats = log.get(gen_id)
    latency = (row.finished - row.created) * 1000.0 if row.finished is not None else None
    finish = stats.finish_reason if stats else ("error" if row.status == "error" else None)
    return {
        "id": row.id,
        "upstream_id": row.id,  # the provider passes its own id upstream as SGLang's rid
        "model": row.model,
        "created_at": _iso(row.created),
        "api_type": stats.api_type if stats else "completions",
        "streamed": stats.streamed if stats else None,
        "cancelled": row.status == "aborted",
        "provider_name": PROVIDER_NAME,
        "latency": latency,
        "generation_time": stats.generation_ms if stats else None,
        "moderation_latency": None,
        "finish_reason": finish,
        "native_finish_reason": stats.native_finish_reason if stats else None,
        "tokens_prompt": row.prompt_tokens,
        "tokens_completion": row.completion_tokens,
        "native_tokens_prompt": row.prompt_tokens,
        "native_tokens_completion": row.completion_tokens,
        "native_tokens_cached": row.cached_tokens,
        "native_tokens_reasoning": stats.reasoning_tokens if stats else None,
        "native_tokens_completion_images": 0,
        "num_media_prompt": 0,
        "num_media_completion": 0,
        "num_input_audio_prompt": 0,
        "num_search_results": 0,
        "num_fetches": 0,
        "total_cost": float(row.cost),
        "usage": float(row.cost),
        "upstream_inference_cost": float(row.cost),
        "cache_discount": None,
        "is_byok": False,
        "origin": "",
        "app_id": None,
        "preset_id": None,
        "router": None,
        "service_tier": None,
        "data_region": "global",
        "external_user": None,
        "http_referer": None,
        "user_agent": None,
        "web_search_engine": None,
        "workspace_id": None,
        "provider_responses": None,
        "status": row.status,  # the ledger's own state: ok, error, aborted or recovered
    }
