"""/v1/models documents in OpenRouter's 2.4 and legacy formats, usage accounting, and each OpenAI
route's own request types, checked against the published field lists (openrouter_schema.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from openrouter_schema import check_legacy, check_usage, check_v24
from sglang_mx.provider.errors import ProviderError
from sglang_mx.provider.listing import document_legacy, document_v24
from sglang_mx.provider.pricing import load_pricing
from sglang_mx.provider.usage import TokenCounts
from sglang_mx.provider.validation import validate_chat, validate_completion

EXAMPLE = Path(__file__).parents[3] / "scripts" / "launch" / "pricing.example.json"
FULL = {
    "id": "zai/glm-5.2-mxfp4",
    "name": "GLM-5.2 MXFP4",
    "hugging_face_id": "zai-org/GLM-5.2",
    "quantization": "mxfp4",
    "context_length": 202752,
    "max_completion_tokens": 32768,
    "usd_per_m": {
        "prompt": 0.6,
        "completion": 2.2,
        "input_cache_read": 0.11,
        "input_cache_write": 0.75,
        "request": 0.001,
    },
    "supported_features": ["tools", "json_mode", "structured_outputs", "reasoning", "logprobs"],
    "capacity": {
        "prompt_tokens_per_minute": 2_000_000,
        "completion_tokens_per_minute": 150_000,
        "requests_per_minute": 600,
        "concurrency": 64,
    },
    "tokenizer": "GLM",
    "is_ready": True,
}


def _model(tmp_path: Path, entry: dict) -> object:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(entry))
    return load_pricing(path)[entry["id"]]


def test_example_pricing_file_is_a_valid_mxfp4_listing() -> None:
    (m,) = load_pricing(EXAMPLE).values()
    doc = document_v24(m)
    assert check_v24(doc) == []
    assert doc["quantization"] == "mxfp4"
    assert check_legacy(document_legacy(m)) == []
    assert document_legacy(m)["quantization"] == "fp4"  # the flat format has no mxfp4


def test_v24_document_carries_modalities_prices_capacity(tmp_path: Path) -> None:
    doc = document_v24(_model(tmp_path, FULL))
    assert check_v24(doc) == [], check_v24(doc)
    (text_in,) = doc["input_modalities"]
    (text_out,) = doc["output_modalities"]
    assert text_in["supported_inputs"]["max_context_length"] == {"value": 202752, "unit": "token"}
    prices = {p["type"]: p for p in text_in["pricing"]}
    assert prices["prompt"]["cost_usd"] == "0.0000006"
    assert (
        prices["cached_prompt"]["cost_usd"] == "0.00000011" and prices["cached_prompt"]["implicit"]
    )
    assert prices["cache_write"]["cost_usd"] == "0.00000075"
    assert text_out["pricing"] == [{"type": "completion", "unit": "token", "cost_usd": "0.0000022"}]
    assert doc["pricing"] == [{"type": "request", "unit": "request", "cost_usd": "0.000000001"}]
    params = text_out["supported_parameters"]
    assert params["max_tokens"] == {"type": "integer", "min": 1, "max": 32768, "unit": "token"}
    assert params["temperature"] == {"type": "range", "min": 0.0, "max": 2.0}
    assert params["top_logprobs"] == {"type": "integer", "min": 0, "max": 20}
    assert {"tools", "response_format", "structured_outputs", "reasoning"} <= set(params)
    assert text_in["capacity"] == [
        {"type": "prompt", "unit": "token", "value": 2_000_000, "per": "minute"}
    ]
    assert {"type": "concurrency", "unit": "request", "value": 64} in doc["capacity"]
    assert doc["tokenizer"] == "GLM" and doc["is_ready"] is True


def test_published_parameter_bounds_are_the_ones_enforced(tmp_path: Path) -> None:
    # Each numeric descriptor's max is accepted and just past it refused, by the same provider.
    m = _model(tmp_path, FULL)
    params = document_v24(m)["output_modalities"][0]["supported_parameters"]
    checked = 0
    for name, desc in params.items():
        extra = {"logprobs": True} if name == "top_logprobs" else {}
        if desc["type"] in ("range", "integer") and "max" in desc:
            step = 1 if desc["type"] == "integer" else 0.01
            for value, ok in ((desc["max"], True), (desc["max"] + step, False)):
                body = {"model": m.id, "messages": [{"role": "user", "content": "x"}]}
                body.update(extra)
                body[name] = value
                _expect(validate_chat, body, {m.id: m}, ok, name)
            checked += 1
    stops = params["stop"]["max_items"]
    for n, ok in ((stops, True), (stops + 1, False)):
        body = {"model": m.id, "messages": [{"role": "user", "content": "x"}]}
        body["stop"] = [f"s{i}" for i in range(n)]
        _expect(validate_chat, body, {m.id: m}, ok, "stop")
    assert checked >= 9  # temperature ... max_tokens, top_logprobs


def _expect(validate, body: dict, models: dict, ok: bool, name: str) -> None:
    if ok:
        validate(body, models)
        return
    with pytest.raises(ProviderError) as exc:
        validate(body, models)
    assert exc.value.status == 400 and name in exc.value.message


def test_unbilled_skus_are_omitted_not_zero_stuffed(tmp_path: Path) -> None:
    entry = {**FULL, "usd_per_m": {"prompt": 1, "completion": 2}, "capacity": {}}
    doc = document_v24(_model(tmp_path, entry))
    assert [p["type"] for p in doc["input_modalities"][0]["pricing"]] == ["prompt"]
    assert "pricing" not in doc and "capacity" not in doc
    assert check_v24(doc) == []


def test_undeclared_quantization_is_null(tmp_path: Path) -> None:
    entry = {k: v for k, v in FULL.items() if k != "quantization"}
    m = _model(tmp_path, entry)
    assert document_v24(m)["quantization"] is None
    assert "quantization" not in document_legacy(m)


def test_checker_catches_broken_documents(tmp_path: Path) -> None:
    # The checker must fail on what the format forbids, or the tests above prove nothing.
    good = document_v24(_model(tmp_path, FULL))
    breaks = {
        "schema_version": lambda d: d.update(schema_version="2.3"),
        "float cost": lambda d: d["input_modalities"][0]["pricing"][0].update(cost_usd=6e-7),
        "exponent cost": lambda d: d["output_modalities"][0]["pricing"][0].update(cost_usd="6E-7"),
        "quantization": lambda d: d.update(quantization="fp5"),
        "flat modality": lambda d: d.update(input_modalities=["text"]),
        "legacy root": lambda d: d.update(supported_features=["tools"]),
        "cache on output": lambda d: d["output_modalities"][0]["pricing"].append(
            {"type": "cache_write", "unit": "token", "cost_usd": "0"}
        ),
        "capacity window": lambda d: d["capacity"].append(
            {"type": "request", "unit": "request", "value": 1}
        ),
    }
    for name, breaker in breaks.items():
        bad = copy.deepcopy(good)
        breaker(bad)
        assert check_v24(bad), name


def test_usage_cost_details_sum_to_cost(tmp_path: Path) -> None:
    m = _model(tmp_path, FULL)
    counts = TokenCounts(prompt=1000, completion=50, cached=600)
    usage = counts.billed(m)
    assert check_usage(usage) == []
    assert usage["prompt_tokens_details"] == {"cached_tokens": 600, "cache_write_tokens": 400}
    cd = usage["cost_details"]
    # 400 written at the cache-write price, 600 read at the cache-read price.
    assert cd["prompt_cost"] == pytest.approx(400 * 0.75e-6)
    assert cd["cached_prompt_cost"] == pytest.approx(600 * 0.11e-6)
    assert cd["completion_cost"] == pytest.approx(50 * 2.2e-6)
    parts = (
        cd["prompt_cost"] + cd["cached_prompt_cost"] + cd["completion_cost"] + cd["request_cost"]
    )
    assert usage["cost"] == pytest.approx(parts, rel=1e-12)
    assert cd["upstream_inference_cost"] == usage["cost"]
    assert cd["upstream_inference_prompt_cost"] == pytest.approx(
        cd["prompt_cost"] + cd["cached_prompt_cost"]
    )
    # Without a cache-write price the written tokens cost the prompt price (the old formula).
    plain = _model(tmp_path, {**FULL, "usd_per_m": {"prompt": 0.6, "completion": 2.2}})
    assert counts.billed(plain)["cost_details"]["prompt_cost"] == pytest.approx(400 * 0.6e-6)


ROUTE_CASES = [
    # (route, field values, accepted?)
    ("completion", {"logprobs": 5}, True),
    ("completion", {"logprobs": 0, "echo": True}, True),
    ("completion", {"logprobs": 6}, False),
    ("completion", {"logprobs": True}, False),
    ("completion", {"best_of": 2}, False),
    ("completion", {"suffix": "end"}, False),
    ("chat", {"logprobs": True, "top_logprobs": 20}, True),
    ("chat", {"logprobs": 5}, False),
    ("chat", {"top_logprobs": 3}, False),  # needs logprobs: true
    ("chat", {"logprobs": True, "top_logprobs": 21}, False),
    ("chat", {"reasoning_effort": "low"}, True),
    ("chat", {"reasoning_effort": "extreme"}, False),
    ("chat", {"functions": [{"name": "f", "parameters": {}}]}, False),
    ("chat", {"modalities": ["text", "audio"]}, False),
]


@pytest.mark.parametrize("route,fields,ok", ROUTE_CASES)
def test_each_route_types_its_own_fields(
    tmp_path: Path, route: str, fields: dict, ok: bool
) -> None:
    models = {"m": _model(tmp_path, {**FULL, "id": "m"})}
    body = {"model": "m", **fields}
    if route == "chat":
        body["messages"] = [{"role": "user", "content": "hi"}]
        validate = validate_chat
    else:
        body["prompt"] = "hi"
        validate = validate_completion
    if ok:
        upstream = validate(body, models).upstream_body
        assert {k: upstream[k] for k in fields} == fields
    else:
        with pytest.raises(ProviderError) as exc:
            validate(body, models)
        assert exc.value.status == 400
        assert any(name in exc.value.message for name in fields)
