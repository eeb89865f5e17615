"""The request fields OpenRouter adds to OpenAI's (its SDKs send them; `openai_fields.py` has
OpenAI's own): what a single provider honours, accepts without effect (with the reason), or
refuses with a 400 that names the field. None is forwarded to SGLang.

Of the `provider` routing preferences, two constrain what may serve the request and are
enforced: `quantizations` and `max_price` (its `prompt` and `completion`, USD per million
tokens as OpenRouter takes them). A
request this provider cannot serve under them gets OpenRouter's 404 for "no endpoint matches";
the rest choose among providers, and there is one here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sglang_mx.provider.errors import ProviderError, bad_request
from sglang_mx.provider.pricing import ModelPricing

_Check = Callable[[Any], bool]


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# Accepted and checked, without effect here: name -> (check, why).
ACCEPTED: dict[str, tuple[_Check, str]] = {
    "usage": (
        lambda v: isinstance(v, dict) and set(v) <= {"include"},
        "usage with cost is always included",
    ),
    "transforms": (
        _str_list,
        "no prompt transforms: a prompt past the context is refused with 413",
    ),
    "session_id": (lambda v: isinstance(v, str), "requests are not grouped into sessions here"),
    "trace": (lambda v: isinstance(v, dict), "no tracing backend here"),
    "cache_control": (
        lambda v: isinstance(v, dict),
        "SGLang's radix cache finds shared prefixes by itself",
    ),
    "route": (lambda v: v in ("fallback", "sort"), "one provider and one model per request"),
}
# Refused when set: name -> why, and what to do instead.
REFUSED = {
    "models": "model fallbacks are not served: send one `model`",
    "plugins": "OpenRouter's plugins (web search, file parsing, response healing) are not served",
    "top_a": "`top_a` sampling is not implemented by SGLang; use `min_p`",
    "image_config": "image output is not served (text-only model)",
    "debug": "OpenRouter's debug echo of the upstream request is not served",
    "stop_server_tools_when": "server-side tools are not served",
    "deferred_tools": "OpenRouter's deferred-tool protocol is not served",
    "prompt_cache_options": "SGLang's radix cache finds shared prefixes by itself",
}
PROVIDER_KEYS = (
    "allow_fallbacks", "data_collection", "enforce_distillable_text", "ignore", "max_price",
    "only", "options", "order", "preferred_max_latency", "preferred_min_throughput",
    "quantizations", "require_parameters", "sort", "zdr",
)  # fmt: skip
_MAX_PRICE_FIELDS = ("prompt", "completion", "request", "image", "audio")


def apply_openrouter(body: dict[str, Any], model: ModelPricing) -> None:
    """Check OpenRouter's own fields of `body` for `model` (400 or 404 when they refuse it)."""
    for name, why in REFUSED.items():
        if body.get(name) not in (None, [], {}):
            raise bad_request(f"`{name}`: {why}", "unsupported_parameter")
    for name, (ok, why) in ACCEPTED.items():
        value = body.get(name)
        if value is not None and not ok(value):
            shown = str(value)[:80]
            raise bad_request(f"`{name}`={shown!r} is not accepted: {why}", "invalid_parameter")
    prefs = body.get("provider")
    if prefs is not None:
        _check_provider(prefs, model)


def _no_endpoint(message: str) -> ProviderError:
    return ProviderError(404, message, "no_matching_endpoint")


def _check_provider(prefs: Any, model: ModelPricing) -> None:
    if not isinstance(prefs, dict) or set(prefs) - set(PROVIDER_KEYS):
        raise bad_request(
            f"`provider` must be an object with keys from {PROVIDER_KEYS}", "invalid_parameter"
        )
    quants = prefs.get("quantizations")
    if quants is not None:
        if not _str_list(quants):
            raise bad_request("`provider.quantizations` must be a list of strings")
        if quants and (model.quantization or "unknown") not in quants:
            raise _no_endpoint(
                f"{model.id} is served as {model.quantization or 'unknown'}, not one of "
                f"provider.quantizations {quants}"
            )
    max_price = prefs.get("max_price")
    if max_price is not None:
        if not isinstance(max_price, dict) or set(max_price) - set(_MAX_PRICE_FIELDS):
            raise bad_request(
                f"`provider.max_price` must be an object with keys from {_MAX_PRICE_FIELDS}"
            )
        for field, cap in max_price.items():
            if field not in ("prompt", "completion"):
                continue  # per-request and media prices: units not compared here (see docs)
            try:
                limit = float(cap)
            except (TypeError, ValueError):
                raise bad_request(f"`provider.max_price.{field}` must be a number") from None
            price = model.usd_per_m.get(field, 0.0)
            if price > limit:
                raise _no_endpoint(
                    f"{model.id} costs {price} USD per million {field} tokens, over "
                    f"provider.max_price.{field} ({limit})"
                )
