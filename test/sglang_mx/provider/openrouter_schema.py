"""Checkers for OpenRouter's provider documents, written from the published field lists (not from
our code): the current format, schema_version "2.4" (OpenRouter's provider integration guide;
../shared/CONTEXT.md section 12), the flat legacy one (CONTEXT.md section 8), and usage
accounting (sections 8 and 12). Each returns a list of problems; empty means valid."""

from __future__ import annotations

import re
from typing import Any

QUANTIZATIONS_V24 = {
    "int4", "int8", "fp4", "mxfp4", "nvfp4", "fp6", "fp8", "mxfp8", "fp16", "bf16", "fp32",
}  # fmt: skip
QUANTIZATIONS_LEGACY = {"int4", "int8", "fp4", "fp6", "fp8", "fp16", "bf16", "fp32"}
INPUT_TYPES = {"text", "image", "video", "audio", "file"}
OUTPUT_TYPES = {
    "text",
    "image",
    "video",
    "speech",
    "transcription",
    "embeddings",
    "rerank",
    "audio",
}
INPUT_PRICES = {"prompt", "cached_prompt", "cache_write"}
OUTPUT_PRICES = {"completion", "internal_reasoning"}
ROOT_PRICES = {"request", "web_search"}
INPUT_UNITS = {"token", "image", "megapixel", "second", "character"}
DESCRIPTOR_TYPES = {"range", "integer", "boolean", "enum", "array", "object", "unknown"}
WINDOWS = {"minute", "hour", "day"}
TEXT_INPUT_CONSTRAINTS = {"max_context_length", "max_prompt_length"}
ROOT_FIELDS = {
    "schema_version", "id", "name", "hugging_face_id", "created", "quantization", "tokenizer",
    "description", "input_modalities", "output_modalities", "pricing", "capacity",
    "passthrough_parameters", "deprecation_date", "is_ready", "is_free", "discount_to_user",
    "openrouter", "datacenters", "compliance",
}  # fmt: skip
# Fields of the flat format that must not appear at the root of a 2.4 document.
LEGACY_ONLY = {"supported_sampling_parameters", "supported_features", "capacity_tpm"}
LEGACY_FIELDS = {
    "id", "name", "created", "description", "context_length", "max_completion_tokens",
    "hugging_face_id", "input_modalities", "output_modalities", "quantization", "pricing",
    "supported_sampling_parameters", "supported_features",
}  # fmt: skip
LEGACY_PRICES = {
    "prompt",
    "completion",
    "request",
    "image",
    "input_cache_read",
    "input_cache_write",
}
LEGACY_SAMPLING = {
    "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "frequency_penalty",
    "presence_penalty", "stop", "seed", "max_tokens", "logit_bias",
}  # fmt: skip
LEGACY_FEATURES = {"tools", "json_mode", "structured_outputs", "reasoning", "logprobs"}
_USD = re.compile(r"^(0|[1-9][0-9]*)(\.[0-9]+)?$")  # plain decimal, no exponent, no sign


def _usd_ok(value: Any) -> bool:
    return isinstance(value, str) and bool(_USD.match(value))


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _typed_entries(
    entries: Any, kinds: set[str], units: set[str], where: str, errs: list[str]
) -> list[tuple[str, dict]]:
    """(path, entry) for each entry of a pricing or capacity list; appends to `errs` what is
    wrong with the list itself and with each entry's type and unit."""
    if not isinstance(entries, list):
        errs.append(f"{where} must be a list")
        return []
    for i, e in enumerate(entries):
        if e.get("type") not in kinds:
            errs.append(f"{where}[{i}].type {e.get('type')!r} not in {sorted(kinds)}")
        if e.get("unit") not in units:
            errs.append(f"{where}[{i}].unit {e.get('unit')!r} not in {sorted(units)}")
    return [(f"{where}[{i}]", e) for i, e in enumerate(entries)]


def _check_prices(entries: Any, kinds: set[str], units: set[str], where: str) -> list[str]:
    errs, seen = [], set()
    for w, e in _typed_entries(entries, kinds, units, f"{where}.pricing", errs):
        if not _usd_ok(e.get("cost_usd")):
            errs.append(f"{w}.cost_usd {e.get('cost_usd')!r} is not a USD decimal string")
        ident = (e.get("type"), e.get("ttl_seconds"), e.get("implicit", False), e.get("utc_start"))
        if ident in seen:
            errs.append(f"{w} duplicates an earlier entry")
        seen.add(ident)
    return errs


def _check_capacity(entries: Any, kinds: set[str], units: set[str], where: str) -> list[str]:
    errs: list[str] = []
    for w, e in _typed_entries(entries, kinds, units, f"{where}.capacity", errs):
        if not _int(e.get("value")) or e["value"] <= 0:
            errs.append(f"{w}.value must be a positive integer")
        if e.get("type") == "concurrency":
            if "per" in e:
                errs.append(f"{w}: concurrency has no window")
        elif e.get("per") not in WINDOWS:
            errs.append(f"{w}.per {e.get('per')!r} not in {sorted(WINDOWS)}")
    return errs


def _check_descriptor(desc: Any, where: str) -> list[str]:
    if not isinstance(desc, dict) or desc.get("type") not in DESCRIPTOR_TYPES:
        return [f"{where} is not a capability descriptor"]
    errs = []
    if desc["type"] in ("range", "integer"):
        for bound in ("min", "max"):
            if bound in desc and not isinstance(desc[bound], (int, float)):
                errs.append(f"{where}.{bound} must be a number")
        if desc["type"] == "integer" and any(not _int(desc.get(b, 0)) for b in ("min", "max")):
            errs.append(f"{where}: integer bounds must be integers")
        if "min" in desc and "max" in desc and desc["min"] > desc["max"]:
            errs.append(f"{where}: min > max")
    if desc["type"] == "enum" and not isinstance(desc.get("values"), list):
        errs.append(f"{where}.values must be a list")
    return errs


def _limit_ok(value: Any) -> bool:
    return isinstance(value, dict) and _int(value.get("value")) and value["value"] > 0


def check_v24(doc: dict[str, Any]) -> list[str]:
    """Problems of one model document against the 2.4 provider format."""
    errs = []
    if doc.get("schema_version") != "2.4":
        errs.append(f"schema_version {doc.get('schema_version')!r} != '2.4'")
    for f in ("id", "name"):
        if not isinstance(doc.get(f), str) or not doc[f]:
            errs.append(f"{f} must be a non-empty string")
    if not isinstance(doc.get("hugging_face_id", ""), str):
        errs.append("hugging_face_id must be a string")
    if not _int(doc.get("created")):
        errs.append("created must be an integer (unix time)")
    q = doc.get("quantization")
    if q is not None and q not in QUANTIZATIONS_V24:
        errs.append(f"quantization {q!r} not in {sorted(QUANTIZATIONS_V24)} or null")
    errs += [f"unknown root field {k!r}" for k in set(doc) - ROOT_FIELDS]
    errs += [f"legacy field {k!r} at the root" for k in set(doc) & LEGACY_ONLY]
    ins, outs = doc.get("input_modalities"), doc.get("output_modalities")
    if not isinstance(ins, list) or not ins:
        errs.append("input_modalities must be a non-empty list of modality objects")
        ins = []
    if not isinstance(outs, list) or not outs:
        errs.append("output_modalities must be a non-empty list of modality objects")
        outs = []
    for i, m in enumerate(ins):
        w = f"input_modalities[{i}]"
        if not isinstance(m, dict) or m.get("type") not in INPUT_TYPES:
            errs.append(f"{w} is not a typed input modality")
            continue
        sup = m.get("supported_inputs", {})
        if m["type"] == "text":
            errs += [f"{w}.supported_inputs.{k} unknown" for k in set(sup) - TEXT_INPUT_CONSTRAINTS]
            errs += [
                f"{w}.supported_inputs.{k} needs a positive value"
                for k in sup
                if not _limit_ok(sup[k])
            ]
        if "pricing" in m:
            errs += _check_prices(m["pricing"], INPUT_PRICES, INPUT_UNITS, w)
        if "capacity" in m:
            errs += _check_capacity(m["capacity"], INPUT_PRICES, INPUT_UNITS, w)
    for i, m in enumerate(outs):
        w = f"output_modalities[{i}]"
        if not isinstance(m, dict) or m.get("type") not in OUTPUT_TYPES:
            errs.append(f"{w} is not a typed output modality")
            continue
        params = m.get("supported_parameters")
        if not isinstance(params, dict):
            errs.append(f"{w}.supported_parameters (required) must be a descriptor map")
            params = {}
        for name, desc in params.items():
            errs += _check_descriptor(desc, f"{w}.supported_parameters.{name}")
        if "streaming" in m and not isinstance(m["streaming"], bool):
            errs.append(f"{w}.streaming must be a bool")
        if "max_length" in m and (m["type"] != "text" or not _limit_ok(m["max_length"])):
            errs.append(f"{w}.max_length must be a positive limit on a text output")
        units = INPUT_UNITS | {"request"}
        if "pricing" in m:
            errs += _check_prices(m["pricing"], OUTPUT_PRICES, units, w)
        if "capacity" in m:
            errs += _check_capacity(m["capacity"], OUTPUT_PRICES | {"concurrency"}, units, w)
    if "pricing" in doc:
        errs += _check_prices(doc["pricing"], ROOT_PRICES, {"request", "search"}, "root")
    if "capacity" in doc:
        errs += _check_capacity(doc["capacity"], ROOT_PRICES | {"concurrency"}, {"request"}, "root")
    return errs


def check_legacy(doc: dict[str, Any]) -> list[str]:
    """Problems of one model against the flat legacy format's field list."""
    errs = [f"missing {f}" for f in LEGACY_FIELDS - set(doc) - {"quantization"}]
    q = doc.get("quantization")
    if q is not None and q not in QUANTIZATIONS_LEGACY:
        errs.append(f"quantization {q!r} not in {sorted(QUANTIZATIONS_LEGACY)}")
    pricing = doc.get("pricing", {})
    errs += [f"pricing.{k} unknown" for k in set(pricing) - LEGACY_PRICES]
    errs += [f"pricing.{k}={v!r} not a USD string" for k, v in pricing.items() if not _usd_ok(v)]
    sampling = set(doc.get("supported_sampling_parameters", []))
    errs += [f"sampling parameter {p!r} unknown" for p in sampling - LEGACY_SAMPLING]
    features = set(doc.get("supported_features", []))
    errs += [f"feature {f!r} unknown" for f in features - LEGACY_FEATURES]
    return errs


def check_usage(usage: dict[str, Any]) -> list[str]:
    """Problems of a usage object against OpenRouter's usage accounting fields."""
    errs = []
    for f in ("prompt_tokens", "completion_tokens", "total_tokens"):
        if not _int(usage.get(f)) or usage[f] < 0:
            errs.append(f"{f} must be a non-negative integer")
    if not errs and usage["total_tokens"] != usage["prompt_tokens"] + usage["completion_tokens"]:
        errs.append("total_tokens != prompt_tokens + completion_tokens")
    details = usage.get("prompt_tokens_details") or {}
    for f in ("cached_tokens", "cache_write_tokens"):
        if not _int(details.get(f)):
            errs.append(f"prompt_tokens_details.{f} must be an integer")
    if (
        not errs
        and details["cached_tokens"] + details["cache_write_tokens"] > usage["prompt_tokens"]
    ):
        errs.append("cached + cache-written tokens exceed prompt_tokens")
    if not _int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens")):
        errs.append("completion_tokens_details.reasoning_tokens must be an integer")
    if not isinstance(usage.get("cost"), (int, float)) or usage["cost"] < 0:
        errs.append("cost must be a non-negative number")
    cd = usage.get("cost_details")
    if not isinstance(cd, dict) or not isinstance(cd.get("upstream_inference_cost"), (int, float)):
        errs.append("cost_details.upstream_inference_cost must be a number")
    return errs
