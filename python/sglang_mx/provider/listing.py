"""The /v1/models documents: OpenRouter's current provider format (schema_version "2.4": typed
input/output modality objects owning their constraints, parameters, pricing and capacity) and,
for integrations made before it, the flat legacy format (`GET /v1/models?format=legacy`)."""

from __future__ import annotations

from typing import Any

from sglang_mx.provider.openai_fields import CHAT_TYPED
from sglang_mx.provider.pricing import (
    CAPACITY_FIELDS,
    PRICE_FIELDS,
    ModelPricing,
    per_token_str,
)
from sglang_mx.provider.validation import SAMPLING_FIELDS

SCHEMA_VERSION = "2.4"
FORMATS = ("2.4", "legacy")
# The legacy format's quantization list has no MX/NV variants: the nearest element width.
_LEGACY_QUANTIZATION = {"mxfp4": "fp4", "nvfp4": "fp4", "mxfp8": "fp8"}
# Optional root fields of a 2.4 document a pricing file may set verbatim.
_ROOT_PASSTHROUGH = (
    "tokenizer", "deprecation_date", "is_ready", "is_free", "discount_to_user", "openrouter",
    "datacenters", "compliance", "passthrough_parameters",
)  # fmt: skip
# supported_features (legacy names) -> 2.4 output supported_parameters they stand for.
_FEATURE_PARAMETERS: dict[str, dict[str, dict[str, Any]]] = {
    "tools": {"tools": {"type": "boolean"}, "tool_choice": {"type": "boolean"}},
    "json_mode": {"response_format": {"type": "boolean"}},
    "structured_outputs": {"structured_outputs": {"type": "boolean"}},
    "reasoning": {"reasoning": {"type": "boolean"}},
    "logprobs": {
        "logprobs": {"type": "boolean"},
        "top_logprobs": {
            "type": "integer",
            "min": CHAT_TYPED["top_logprobs"][1][0],
            "max": CHAT_TYPED["top_logprobs"][1][1],
        },
    },
}
MAX_STOP_SEQUENCES = 16  # validation.py's limit on `stop`


def _descriptor(name: str, model: ModelPricing) -> dict[str, Any] | None:
    """The 2.4 capability descriptor of a sampling parameter, from the bounds we validate."""
    if name == "max_tokens":
        return {"type": "integer", "min": 1, "max": model.max_completion_tokens, "unit": "token"}
    if name == "stop":
        return {"type": "array", "items": {"type": "unknown"}, "max_items": MAX_STOP_SEQUENCES}
    if name == "logit_bias":
        return {"type": "unknown"}  # token-id keys: no closed descriptor
    if name not in SAMPLING_FIELDS:
        return None
    types, bounds = SAMPLING_FIELDS[name]
    desc: dict[str, Any] = {"type": "integer" if types == (int,) else "range"}
    if bounds:
        desc["min"], desc["max"] = bounds
    return desc


def _price(kind: str, model: ModelPricing, field: str, **qualifiers: Any) -> dict[str, Any]:
    return {"type": kind, "unit": "token", **qualifiers, "cost_usd": _usd(model, field)}


def _usd(model: ModelPricing, field: str) -> str:
    return per_token_str(model.per_token(field))


def _capacity(model: ModelPricing, scope: str) -> list[dict[str, Any]]:
    out = []
    for field, value in model.capacity.items():
        where, kind = CAPACITY_FIELDS[field]
        if where != scope:
            continue
        unit = "request" if kind in ("request", "concurrency") else "token"
        entry = {"type": kind, "unit": unit, "value": value}
        if kind != "concurrency":
            entry["per"] = "minute"
        out.append(entry)
    return out


def document_v24(model: ModelPricing) -> dict[str, Any]:
    """One model in the 2.4 provider format. Unbilled SKUs are omitted, not zero-stuffed."""
    # SGLang caches prefixes by itself: cache reads and writes are provider-initiated (implicit).
    context = {"value": model.context_length, "unit": "token"}
    text_in: dict[str, Any] = {
        "type": "text",
        "supported_inputs": {"max_context_length": context},
        "pricing": [_price("prompt", model, "prompt")],
    }
    if model.priced("input_cache_read"):
        text_in["pricing"].append(_price("cached_prompt", model, "input_cache_read", implicit=True))
    if model.priced("input_cache_write"):
        text_in["pricing"].append(_price("cache_write", model, "input_cache_write", implicit=True))
    params: dict[str, Any] = {}
    for name in model.supported_sampling_parameters:
        desc = _descriptor(name, model)
        if desc is not None:
            params[name] = desc
    for feature in model.supported_features:
        params.update(_FEATURE_PARAMETERS.get(feature, {}))
    text_out: dict[str, Any] = {
        "type": "text",
        "max_length": {"value": model.max_completion_tokens, "unit": "token"},
        "streaming": True,
        "supported_parameters": params,
        "pricing": [_price("completion", model, "completion")],
    }
    for entry, scope in ((text_in, "input"), (text_out, "output")):
        if cap := _capacity(model, scope):
            entry["capacity"] = cap
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": model.id,
        "name": model.name or model.id,
        "hugging_face_id": model.hugging_face_id,
        "created": model.created,
        "quantization": model.quantization,
        "description": model.description,
        "input_modalities": [text_in],
        "output_modalities": [text_out],
    }
    if model.priced("request"):
        doc["pricing"] = [
            {"type": "request", "unit": "request", "cost_usd": _usd(model, "request")}
        ]
    if cap := _capacity(model, "root"):
        doc["capacity"] = cap
    doc.update({k: model.extra[k] for k in _ROOT_PASSTHROUGH if k in model.extra})
    return doc


def document_legacy(model: ModelPricing) -> dict[str, Any]:
    """One model in the flat legacy format (still accepted by OpenRouter)."""
    doc: dict[str, Any] = {
        "id": model.id,
        "object": "model",
        "name": model.name or model.id,
        "created": model.created,
        "description": model.description,
        "context_length": model.context_length,
        "max_completion_tokens": model.max_completion_tokens,
        "hugging_face_id": model.hugging_face_id,
        "input_modalities": ["text"],
        "output_modalities": ["text"],
        "pricing": {k: _usd(model, k) for k in PRICE_FIELDS},
        "supported_sampling_parameters": list(model.supported_sampling_parameters),
        "supported_features": list(model.supported_features),
        **model.extra,
    }
    if model.quantization is not None:
        doc["quantization"] = _LEGACY_QUANTIZATION.get(model.quantization, model.quantization)
    return doc


def document(model: ModelPricing, fmt: str) -> dict[str, Any]:
    return document_legacy(model) if fmt == "legacy" else document_v24(model)
