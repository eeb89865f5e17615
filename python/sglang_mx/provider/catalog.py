"""The user-facing model list of OpenRouter's API (`GET /api/v1/models`, `GET /api/v1/model/
{author}/{slug}`): what an app reads to pick a model and price a call, built from the same
pricing file as the provider listing. The provider listing (`listing.py`, schema 2.4, on
`GET /v1/models`) is what OpenRouter's ingestion reads; this is the shape OpenRouter itself
serves to its users and its SDKs validate (`id`, `canonical_slug`, `architecture`, `pricing`
as USD-per-token strings, `top_provider`, `supported_parameters`, ...)."""

from __future__ import annotations

from typing import Any

from sglang_mx.provider.errors import bad_request
from sglang_mx.provider.pricing import PRICE_FIELDS, ModelPricing, per_token_str
from sglang_mx.provider.validation import SAMPLING_FIELDS

API_BASE = "/api/v1"
# supported_features (pricing file) -> the request parameters each one stands for, by the names
# OpenRouter's `supported_parameters` uses.
_FEATURE_PARAMETERS = {
    "tools": ("tools", "tool_choice", "parallel_tool_calls"),
    "json_mode": ("response_format",),
    "structured_outputs": ("response_format", "structured_outputs"),
    "reasoning": ("reasoning", "include_reasoning", "reasoning_effort"),
    "logprobs": ("logprobs", "top_logprobs"),
}
# validated beside SAMPLING_FIELDS, in validation._common
_OTHER_PARAMETERS = ("stop", "seed", "max_tokens", "logit_bias")


def supported_parameters(model: ModelPricing) -> list[str]:
    """The request parameters this model is served with: its declared sampling parameters that
    the provider validates and forwards, plus those its declared features stand for."""
    served = set(SAMPLING_FIELDS) | set(_OTHER_PARAMETERS)
    out = [p for p in model.supported_sampling_parameters if p in served]
    if "max_tokens" in out:
        out.append("max_completion_tokens")  # the same cap, OpenAI's newer name
    for feature in model.supported_features:
        out.extend(p for p in _FEATURE_PARAMETERS.get(feature, ()) if p not in out)
    return out


def _pricing(model: ModelPricing) -> dict[str, str]:
    # prompt and completion always (the schema requires them), the rest only when priced.
    fields = [f for f in PRICE_FIELDS if f in ("prompt", "completion") or model.priced(f)]
    return {f: per_token_str(model.per_token(f)) for f in fields}


def model_document(model: ModelPricing) -> dict[str, Any]:
    """One model as OpenRouter's `GET /api/v1/models` lists it."""
    tokenizer = model.extra.get("tokenizer")
    doc: dict[str, Any] = {
        "id": model.id,
        "canonical_slug": model.id,
        "name": model.name or model.id,
        "created": model.created,
        "description": model.description,
        "context_length": model.context_length,
        "hugging_face_id": model.hugging_face_id or None,
        "architecture": {
            "modality": "text->text",
            "input_modalities": ["text"],
            "output_modalities": ["text"],
            # OpenRouter's tokenizer groups name no GLM family: "Other", unless the file says.
            "tokenizer": tokenizer if isinstance(tokenizer, str) else "Other",
            "instruct_type": None,
        },
        "pricing": _pricing(model),
        "top_provider": {
            "context_length": model.context_length,
            "max_completion_tokens": model.max_completion_tokens,
            "is_moderated": False,
        },
        "per_request_limits": None,
        "supported_parameters": supported_parameters(model),
        "default_parameters": None,
        "supported_voices": None,
        "links": {"details": f"{API_BASE}/model/{model.id}"},
    }
    if "reasoning" in model.supported_features:
        doc["reasoning"] = {"mandatory": False}
    return doc


def model_list(models: list[ModelPricing], query: dict[str, str]) -> dict[str, Any]:
    """The list response: `supported_parameters` (comma-separated, all required) filters,
    `offset` and `limit` page (the SDK asks for the next page while a page comes back full)."""
    wanted = [p for p in query.get("supported_parameters", "").split(",") if p]
    docs = [model_document(m) for m in models]
    docs = [d for d in docs if all(p in d["supported_parameters"] for p in wanted)]
    offset, limit = _int(query, "offset", 0), _int(query, "limit", 500)
    return {
        "data": docs[offset : offset + limit],
        "total_count": len(docs),
        "links": {"next": None},
    }


def _int(query: dict[str, str], name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or (name == "limit" and int(raw) == 0):
        kind = "positive" if name == "limit" else "non-negative"
        msg = f"`{name}` must be a {kind} integer, not {raw[:20]!r}"
        raise bad_request(msg, "invalid_parameter")
    return int(raw)
