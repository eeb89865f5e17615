"""Validate client requests and build the upstream body from an allow-list of fields, so
malformed input gets a clear 400/413 and SGLang-internal fields (rid, cache_salt, lora_path,
...) cannot be smuggled through."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglang_mx.provider import jsonio, openai_fields, openrouter_fields
from sglang_mx.provider.errors import ProviderError, bad_request
from sglang_mx.provider.pricing import ModelPricing

MAX_BODY_BYTES = 8 * 1024 * 1024
ROLES = ("system", "user", "assistant", "tool", "developer")

# name -> (types accepted, optional (lo, hi) bounds); booleans are rejected where numbers are asked.
_NUMBER = (int, float)
SAMPLING_FIELDS: dict[str, tuple[tuple[type, ...], tuple[float, float] | None]] = {
    "temperature": (_NUMBER, (0.0, 2.0)),
    "top_p": (_NUMBER, (0.0, 1.0)),
    "top_k": ((int,), (-1, 1_000_000)),
    "min_p": (_NUMBER, (0.0, 1.0)),
    "repetition_penalty": (_NUMBER, (0.0, 2.0)),
    "frequency_penalty": (_NUMBER, (-2.0, 2.0)),
    "presence_penalty": (_NUMBER, (-2.0, 2.0)),
    "seed": ((int,), None),
    "min_tokens": ((int,), (0, 1_000_000)),
    "ignore_eos": ((bool,), None),
}  # each route's own fields (`logprobs` differs by route): openai_fields.py
_PASSTHROUGH = ("response_format", "tools", "tool_choice", "user")


@dataclass(frozen=True)
class ParsedRequest:
    model: ModelPricing
    stream: bool
    max_tokens: int
    upstream_body: dict[str, Any]


def parse_json(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_BODY_BYTES:
        raise ProviderError(413, f"request body over {MAX_BODY_BYTES} bytes", "body_too_large")
    if not raw.strip():
        raise bad_request("empty request body; send a JSON object", "invalid_json")
    try:
        body = jsonio.loads(raw)
    except (ValueError, RecursionError) as e:
        raise bad_request(f"request body is not valid JSON: {str(e)[:200]}", "invalid_json") from e
    if not isinstance(body, dict):
        raise bad_request("request body must be a JSON object", "invalid_json")
    return body


def is_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _common(body: dict[str, Any], models: dict[str, ModelPricing]) -> tuple[ModelPricing, dict]:
    model_id = body.get("model")
    if not isinstance(model_id, str) or not model_id:
        raise bad_request("`model` is required and must be a string", "invalid_model")
    model = models.get(model_id)
    if model is None:
        raise bad_request(
            f"{model_id[:100]!r} is not a valid model ID; see GET /v1/models", "unknown_model"
        )
    openrouter_fields.apply_openrouter(body, model)  # OpenRouter's own fields: none forwarded
    out: dict[str, Any] = {"model": model.upstream_model}
    for name, (types, bounds) in SAMPLING_FIELDS.items():
        if body.get(name) is None:
            continue
        value = body[name]
        if not is_type(value, types) or (value != value):  # NaN fails value == value
            raise bad_request(
                f"`{name}` must be of type {'/'.join(t.__name__ for t in types)}",
                "invalid_parameter",
            )
        if bounds and not bounds[0] <= value <= bounds[1]:
            raise bad_request(
                f"`{name}`={value} outside [{bounds[0]}, {bounds[1]}]", "invalid_parameter"
            )
        out[name] = value
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if (
            not isinstance(stops, list)
            or len(stops) > 16
            or not all(isinstance(s, str) and s for s in stops)
        ):
            raise bad_request(
                "`stop` must be a string or a list of up to 16 strings", "invalid_parameter"
            )
        out["stop"] = stops
    logit_bias = body.get("logit_bias")
    if logit_bias is not None:
        if not isinstance(logit_bias, dict) or not all(
            is_type(v, _NUMBER) and -100 <= v <= 100 for v in logit_bias.values()
        ):
            raise bad_request(
                "`logit_bias` must map token ids to numbers in [-100, 100]", "invalid_parameter"
            )
        out["logit_bias"] = logit_bias
    n = body.get("n", 1)
    if n != 1 or isinstance(n, bool):
        raise bad_request("only `n`=1 is supported", "invalid_parameter")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request("`stream` must be a boolean", "invalid_parameter")
    for name in _PASSTHROUGH:
        if name in body:
            out[name] = body[name]
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = model.max_completion_tokens
    if not is_type(max_tokens, (int,)) or max_tokens < 1:
        raise bad_request("`max_tokens` must be a positive integer", "invalid_parameter")
    if max_tokens > model.max_completion_tokens:
        raise bad_request(
            f"`max_tokens`={max_tokens} exceeds this model's max_completion_tokens "
            f"({model.max_completion_tokens})",
            "max_tokens_exceeded",
        )
    out["max_tokens"] = max_tokens
    out["stream"] = stream
    return model, out


def check_prompt_size(model: ModelPricing, chars: int, exact_tokens: bool = False) -> None:
    # A cheap early 413 for prompts that cannot fit (no token spans 64+ characters in practice);
    # the upstream checks the exact token count and its refusal is mapped to 413 too.
    if chars > model.context_length * (1 if exact_tokens else 64):
        raise ProviderError(
            413,
            f"prompt of {chars} characters cannot fit the {model.context_length}-token context",
            "context_length_exceeded",
        )


def _content_chars(content: Any, where: str) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise bad_request(
                    f"{where}: only text content parts are supported", "unsupported_modality"
                )
            if not isinstance(part.get("text"), str):
                raise bad_request(f"{where}: text part needs a string `text`", "invalid_messages")
            total += len(part["text"])
        return total
    raise bad_request(
        f"{where}: `content` must be a string or a list of text parts", "invalid_messages"
    )


def validate_chat(body: dict[str, Any], models: dict[str, ModelPricing]) -> ParsedRequest:
    model, out = _common(body, models)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("`messages` must be a non-empty list", "invalid_messages")
    chars = 0
    clean = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise bad_request(f"messages[{i}] must be an object", "invalid_messages")
        if m.get("role") not in ROLES:
            raise bad_request(f"messages[{i}].role must be one of {ROLES}", "invalid_messages")
        content = m.get("content")
        if content is None and m["role"] == "assistant" and m.get("tool_calls"):
            clean.append(m)
            continue
        chars += _content_chars(content, f"messages[{i}]")
        clean.append(m)
    check_prompt_size(model, chars)
    openai_fields.apply_chat(body, out)
    out["messages"] = clean
    return ParsedRequest(model, out["stream"], out["max_tokens"], out)


def validate_completion(body: dict[str, Any], models: dict[str, ModelPricing]) -> ParsedRequest:
    model, out = _common(body, models)
    prompt = body.get("prompt")
    if isinstance(prompt, str) and prompt:
        chars = len(prompt)
    elif isinstance(prompt, list) and prompt and all(is_type(t, (int,)) and t >= 0 for t in prompt):
        chars = len(prompt)
    else:
        raise bad_request(
            "`prompt` must be a non-empty string or list of token ids", "invalid_prompt"
        )
    check_prompt_size(model, chars, exact_tokens=isinstance(prompt, list))
    openai_fields.apply_completion(body, out)
    out["prompt"] = prompt
    return ParsedRequest(model, out["stream"], out["max_tokens"], out)
