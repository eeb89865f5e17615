"""Each OpenAI route's own request fields, typed as that route types them (Completions
`logprobs` is an integer 0-5; Chat `logprobs` a bool with `top_logprobs` 0-20), and what the
provider does with every other field the two APIs document: forward it, accept it without
forwarding (with the reason), or refuse it with a 400 that names it.

The sampling fields both routes share are checked in `validation.py`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sglang_mx.provider.errors import bad_request

Typed = dict[str, tuple[tuple[type, ...], tuple[float, float] | None]]

CHAT_TYPED: Typed = {
    "logprobs": ((bool,), None),
    "top_logprobs": ((int,), (0, 20)),
    "parallel_tool_calls": ((bool,), None),
}
COMPLETION_TYPED: Typed = {
    "logprobs": ((int,), (0, 5)),
    "echo": ((bool,), None),
    "best_of": ((int,), (1, 1)),  # only n = 1 is served, and best_of must be >= n
}
# SGLang's reasoning tiers (ReasoningEffortTier in its OpenAI protocol) that OpenAI documents.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
# OpenRouter's `reasoning` request object (its reasoning-tokens guide) and what is not served.
REASONING_KEYS = ("enabled", "effort", "max_tokens", "exclude", "summary")
# `reasoning.effort` may also say "max" (OpenRouter's SDKs): on, like any effort but "none".
OBJECT_EFFORTS = (*REASONING_EFFORTS, "max")
SUMMARY_LEVELS = ("auto", "concise", "detailed")  # accepted: the reasoning comes back whole
REASONING_REFUSED = {
    "max_tokens": "a reasoning token budget is not served; cap the turn with `max_tokens`",
    "exclude": "reasoning is always returned (as `reasoning` and `reasoning_content`)",
}


def _is(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _str_map(v: Any) -> bool:
    return (
        isinstance(v, dict)
        and len(v) <= 16
        and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())
    )


def _stream_options(v: Any) -> bool:
    allowed = ("include_usage", "include_obfuscation")
    return isinstance(v, dict) and all(k in allowed and isinstance(x, bool) for k, x in v.items())


# Accepted and checked, not forwarded: name -> (check, why it is not forwarded).
_Check = Callable[[Any], bool]
_COMMON_UNUSED: dict[str, tuple[_Check, str]] = {
    "stream_options": (
        _stream_options,
        "usage always arrives in a final chunk before [DONE] (OpenRouter's convention)",
    ),
}
CHAT_UNUSED: dict[str, tuple[_Check, str]] = {
    **_COMMON_UNUSED,
    "store": (lambda v: isinstance(v, bool), "nothing is stored for later retrieval here"),
    "metadata": (_str_map, "tags for OpenAI's stored completions; nothing is stored here"),
    "service_tier": (
        lambda v: v in ("auto", "default", "flex", "scale", "priority"),
        "one service tier here",
    ),
    "prompt_cache_key": (
        lambda v: isinstance(v, str),
        "SGLang's radix cache finds shared prefixes by itself",
    ),
    "prompt_cache_retention": (
        lambda v: v in ("in-memory", "24h"),
        "cache lifetime is SGLang's (LRU eviction)",
    ),
    "safety_identifier": (lambda v: isinstance(v, str), "no per-user safety system here"),
    "prediction": (
        lambda v: isinstance(v, dict) and v.get("type") == "content",
        "predicted outputs only shorten latency; the output is the same without",
    ),
    "modalities": (lambda v: v == ["text"], "text is the only output"),
    "verbosity": (lambda v: v == "medium", "only the default verbosity is served"),
}
COMPLETION_UNUSED: dict[str, tuple[_Check, str]] = dict(_COMMON_UNUSED)
# Refused when set: what the provider cannot serve, and what to send instead.
CHAT_REFUSED = {
    "audio": "audio output is not served (text-only model)",
    "functions": "deprecated by OpenAI and not served; send `tools`",
    "function_call": "deprecated by OpenAI and not served; send `tool_choice`",
    "web_search_options": "web search is not served",
}
COMPLETION_REFUSED = {
    "suffix": "insertion (`suffix`) is not implemented by SGLang's completions route",
}


def _check_typed(body: dict[str, Any], out: dict[str, Any], typed: Typed) -> None:
    for name, (types, bounds) in typed.items():
        value = body.get(name)
        if value is None:
            continue
        if not _is(value, types):
            kind = "/".join(t.__name__ for t in types)
            raise bad_request(f"`{name}` must be of type {kind}", "invalid_parameter")
        if bounds and not bounds[0] <= value <= bounds[1]:
            raise bad_request(
                f"`{name}`={value} outside [{bounds[0]}, {bounds[1]}]", "invalid_parameter"
            )
        out[name] = value


def _check_unused(body: dict[str, Any], unused: dict[str, tuple[_Check, str]]) -> None:
    for name, (ok, why) in unused.items():
        value = body.get(name)
        if value is not None and not ok(value):
            shown = str(value)[:80]
            raise bad_request(f"`{name}`={shown!r} is not accepted: {why}", "invalid_parameter")


def _check_refused(body: dict[str, Any], refused: dict[str, str]) -> None:
    for name, why in refused.items():
        if body.get(name) not in (None, "", [], {}):
            raise bad_request(f"`{name}`: {why}", "unsupported_parameter")


def _thinking(body: dict[str, Any]) -> bool | None:
    """Whether the request asks the model to think: OpenRouter's `reasoning` object (`enabled`,
    or `effort` "none" for off) or SGLang's `chat_template_kwargs.enable_thinking`; None when it
    says nothing (the model's default: GLM thinks when offered tools)."""
    said: list[bool] = []
    reasoning = body.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, dict) or set(reasoning) - set(REASONING_KEYS):
            raise bad_request(
                f"`reasoning` must be an object with keys from {REASONING_KEYS}",
                "invalid_parameter",
            )
        for name, why in REASONING_REFUSED.items():
            if reasoning.get(name) not in (None, False):
                raise bad_request(f"`reasoning.{name}`: {why}", "unsupported_parameter")
        enabled, effort = reasoning.get("enabled"), reasoning.get("effort")
        if enabled is not None and not isinstance(enabled, bool):
            raise bad_request("`reasoning.enabled` must be a boolean", "invalid_parameter")
        if effort is not None and effort not in OBJECT_EFFORTS:
            raise bad_request(
                f"`reasoning.effort` must be one of {OBJECT_EFFORTS}", "invalid_parameter"
            )
        if reasoning.get("summary") not in (None, *SUMMARY_LEVELS):
            raise bad_request(
                f"`reasoning.summary` must be one of {SUMMARY_LEVELS}", "invalid_parameter"
            )
        if enabled is not None:
            said.append(enabled)
        if effort is not None:
            said.append(effort != "none")
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None:
        if not isinstance(kwargs, dict) or set(kwargs) - {"enable_thinking"}:
            raise bad_request(
                "`chat_template_kwargs` may only hold `enable_thinking`", "invalid_parameter"
            )
        if "enable_thinking" in kwargs:
            if not isinstance(kwargs["enable_thinking"], bool):
                raise bad_request(
                    "`chat_template_kwargs.enable_thinking` must be a boolean",
                    "invalid_parameter",
                )
            said.append(kwargs["enable_thinking"])
    if len(set(said)) > 1:
        raise bad_request(
            "the request both asks for reasoning and turns it off", "invalid_parameter"
        )
    return said[0] if said else None


def apply_chat(body: dict[str, Any], out: dict[str, Any]) -> None:
    """Check Chat Completions' own fields and copy the forwarded ones into `out`."""
    _check_refused(body, CHAT_REFUSED)
    _check_typed(body, out, CHAT_TYPED)
    if out.get("top_logprobs") is not None and out.get("logprobs") is not True:
        raise bad_request("`top_logprobs` needs `logprobs`: true", "invalid_parameter")
    effort = body.get("reasoning_effort")
    if effort is not None:
        if effort not in REASONING_EFFORTS:
            raise bad_request(
                f"`reasoning_effort` must be one of {REASONING_EFFORTS}", "invalid_parameter"
            )
        out["reasoning_effort"] = effort
    thinking = _thinking(body)
    if thinking is not None:
        out["chat_template_kwargs"] = {"enable_thinking": thinking}
    _check_unused(body, CHAT_UNUSED)


def apply_completion(body: dict[str, Any], out: dict[str, Any]) -> None:
    """Check Completions' own fields and copy the forwarded ones into `out`."""
    _check_refused(body, COMPLETION_REFUSED)
    _check_typed(body, out, COMPLETION_TYPED)
    _check_unused(body, COMPLETION_UNUSED)
