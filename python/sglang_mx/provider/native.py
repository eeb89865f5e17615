"""SGLang's native `/generate` as the provider serves it (what `sgl.RuntimeEndpoint` sends):
an allow-list of top-level and `sampling_params` fields, typed and bounded, from which the
upstream body is rebuilt, so SGLang-internal fields (`rid`, `cache_salt`, `lora_path`,
`session_params`, ...) cannot be smuggled through and multimodal input is refused.

A body is one prompt (`text` or `input_ids`) or a batch (a list of them); `sampling_params.n`
samples each. Every output sequence is billed on its own ledger row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglang_mx.provider.errors import ProviderError, bad_request
from sglang_mx.provider.pricing import ModelPricing
from sglang_mx.provider.validation import SAMPLING_FIELDS, check_prompt_size, is_type

MAX_BATCH = 64  # prompts x samples per request (each is a billed output)
MAX_N = 16
MAX_LIST = 16  # stop strings, stop regexes, stop token ids, token_ids_logprob
MAX_TOP_LOGPROBS = 20  # as the Chat route's top_logprobs
SGLANG_DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's own default when a request leaves it out

# sampling_params forwarded besides the ones validation.SAMPLING_FIELDS types for the OpenAI routes.
_BOOLS = ("ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim")
_GRAMMARS = ("regex", "json_schema", "ebnf")
_SHARED = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "frequency_penalty",
           "presence_penalty")  # fmt: skip
_MULTIMODAL = ("image_data", "video_data", "audio_data", "input_embeds")


@dataclass(frozen=True)
class NativeRequest:
    model: ModelPricing
    stream: bool
    batch: bool  # the reply is a list (a list of prompts, or n > 1)
    prompts: int
    n: int
    max_new_tokens: int
    upstream_body: dict[str, Any]

    @property
    def outputs(self) -> int:
        return self.prompts * self.n


def _opt(body: dict[str, Any], name: str) -> Any:
    value = body.get(name)
    return None if value is None else value


def _int(where: str, value: Any, lo: int, hi: int) -> int:
    if not is_type(value, (int,)) or not lo <= value <= hi:
        raise bad_request(f"`{where}` must be an integer in [{lo}, {hi}]", "invalid_parameter")
    return value


def _str_list(where: str, value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or len(items) > MAX_LIST:
        raise bad_request(
            f"`{where}` must be a string or a list of up to {MAX_LIST} strings",
            "invalid_parameter",
        )
    if not all(isinstance(s, str) and s for s in items):
        raise bad_request(f"`{where}` must hold non-empty strings", "invalid_parameter")
    return list(items)


def _id_list(where: str, value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_LIST:
        raise bad_request(
            f"`{where}` must be a list of up to {MAX_LIST} token ids", "invalid_parameter"
        )
    if not all(is_type(t, (int,)) and t >= 0 for t in value):
        raise bad_request(f"`{where}` must hold non-negative integer ids", "invalid_parameter")
    return list(value)


def _prompts(body: dict[str, Any], model: ModelPricing) -> tuple[str, Any, int, bool]:
    """(field, value, prompt count, is a batch) of the one prompt field given."""
    text, ids = _opt(body, "text"), _opt(body, "input_ids")
    if (text is None) == (ids is None):
        raise bad_request("send exactly one of `text` and `input_ids`", "invalid_prompt")
    if text is not None:
        if isinstance(text, str) and text:
            check_prompt_size(model, len(text))
            return "text", text, 1, False
        if isinstance(text, list) and text and all(isinstance(t, str) and t for t in text):
            for t in text:
                check_prompt_size(model, len(t))
            return "text", text, len(text), True
        raise bad_request(
            "`text` must be a non-empty string or a non-empty list of them", "invalid_prompt"
        )

    def ok(row: Any) -> bool:
        return isinstance(row, list) and bool(row) and all(is_type(t, (int,)) for t in row)

    if ok(ids):
        return "input_ids", ids, 1, False
    if isinstance(ids, list) and ids and all(ok(row) for row in ids):
        return "input_ids", ids, len(ids), True
    raise bad_request(
        "`input_ids` must be a non-empty list of token ids or a list of such lists",
        "invalid_prompt",
    )


def _sampling(params: Any, model: ModelPricing) -> dict[str, Any]:
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise bad_request(
            "`sampling_params` must be one object (it applies to every prompt of a batch)",
            "invalid_parameter",
        )
    out: dict[str, Any] = {}
    for name in _SHARED:
        value = params.get(name)
        if value is None:
            continue
        types, bounds = SAMPLING_FIELDS[name]
        if not is_type(value, types) or value != value:  # NaN fails value == value
            raise bad_request(f"`sampling_params.{name}` must be a number", "invalid_parameter")
        if bounds and not bounds[0] <= value <= bounds[1]:
            raise bad_request(
                f"`sampling_params.{name}`={value} outside [{bounds[0]}, {bounds[1]}]",
                "invalid_parameter",
            )
        out[name] = value
    cap = model.max_completion_tokens
    max_new = params.get("max_new_tokens")
    if max_new is None:
        max_new = min(SGLANG_DEFAULT_MAX_NEW_TOKENS, cap)
    if is_type(max_new, (int,)) and max_new > cap:
        raise bad_request(
            f"`sampling_params.max_new_tokens`={max_new} exceeds this model's "
            f"max_completion_tokens ({cap})",
            "max_tokens_exceeded",
        )
    out["max_new_tokens"] = _int("sampling_params.max_new_tokens", max_new, 0, cap)
    if params.get("min_new_tokens") is not None:
        out["min_new_tokens"] = _int(
            "sampling_params.min_new_tokens", params["min_new_tokens"], 0, out["max_new_tokens"]
        )
    out["n"] = _int("sampling_params.n", 1 if params.get("n") is None else params["n"], 1, MAX_N)
    for name in _BOOLS:
        if params.get(name) is not None:
            if not isinstance(params[name], bool):
                raise bad_request(
                    f"`sampling_params.{name}` must be a boolean", "invalid_parameter"
                )
            out[name] = params[name]
    for name in ("stop", "stop_regex"):
        if params.get(name) is not None:
            out[name] = _str_list(f"sampling_params.{name}", params[name])
    if params.get("stop_token_ids") is not None:
        out["stop_token_ids"] = _id_list("sampling_params.stop_token_ids", params["stop_token_ids"])
    grammars = [g for g in _GRAMMARS if params.get(g) is not None]
    if len(grammars) > 1:
        raise bad_request(f"give at most one of {_GRAMMARS}", "invalid_parameter")
    for name in grammars:
        if not isinstance(params[name], str) or not params[name]:
            raise bad_request(f"`sampling_params.{name}` must be a string", "invalid_parameter")
        out[name] = params[name]
    if params.get("sampling_seed") is not None:
        out["sampling_seed"] = _int("sampling_params.sampling_seed", params["sampling_seed"],
                                    0, 2**63 - 1)  # fmt: skip
    bias = params.get("logit_bias")
    if bias is not None:
        if (
            not isinstance(bias, dict)
            or len(bias) > 300
            or not all(is_type(v, (int, float)) and -100 <= v <= 100 for v in bias.values())
        ):
            raise bad_request(
                "`sampling_params.logit_bias` must map up to 300 token ids to numbers in "
                "[-100, 100]",
                "invalid_parameter",
            )
        out["logit_bias"] = bias
    return out


def validate_generate(
    body: dict[str, Any], models: dict[str, ModelPricing], model: ModelPricing | None
) -> NativeRequest:
    """Check a `/generate` body; `model` is the one priced model the upstream serves."""
    if model is None:
        raise ProviderError(
            503,
            "native routes need the upstream's model in the pricing file (priced once, as "
            "`upstream_model`); the operator must fix the pricing",
            "native_model_unknown",
        )
    asked = body.get("model")
    if asked is not None and asked != model.id:
        shown = str(asked)[:100]
        raise bad_request(
            f"{shown!r} is not served on /generate here; this upstream serves {model.id!r}",
            "unknown_model",
        )
    for name in _MULTIMODAL:
        if body.get(name) not in (None, [], {}):
            raise bad_request(f"`{name}`: only text prompts are served", "unsupported_modality")
    field, prompt, count, batch = _prompts(body, model)
    sampling = _sampling(body.get("sampling_params"), model)
    n = sampling["n"]
    if count * n > MAX_BATCH:
        raise bad_request(
            f"{count} prompts x n={n} is over {MAX_BATCH} outputs per request", "invalid_parameter"
        )
    out: dict[str, Any] = {field: prompt, "sampling_params": sampling}
    if body.get("return_logprob") is not None:
        if not isinstance(body["return_logprob"], bool):
            raise bad_request("`return_logprob` must be a boolean", "invalid_parameter")
        out["return_logprob"] = body["return_logprob"]
    if body.get("return_text_in_logprobs") is not None:
        if not isinstance(body["return_text_in_logprobs"], bool):
            raise bad_request("`return_text_in_logprobs` must be a boolean", "invalid_parameter")
        out["return_text_in_logprobs"] = body["return_text_in_logprobs"]
    if body.get("logprob_start_len") is not None:
        out["logprob_start_len"] = _int(
            "logprob_start_len", body["logprob_start_len"], -1, model.context_length
        )
    if body.get("top_logprobs_num") is not None:
        out["top_logprobs_num"] = _int(
            "top_logprobs_num", body["top_logprobs_num"], 0, MAX_TOP_LOGPROBS
        )
    if body.get("token_ids_logprob") is not None:
        out["token_ids_logprob"] = _id_list("token_ids_logprob", body["token_ids_logprob"])
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad_request("`stream` must be a boolean", "invalid_parameter")
    out["stream"] = stream
    return NativeRequest(model, stream, batch or n > 1, count, n, sampling["max_new_tokens"], out)


def model_info(model: ModelPricing | None, limits: Any) -> dict[str, Any]:
    """`GET /get_model_info` for customers: what `RuntimeEndpoint` reads (`model_path`, which
    picks a chat template) under the public model id; no host paths or server settings."""
    if model is None:
        raise ProviderError(503, "the upstream's model is not priced here", "native_model_unknown")
    info: dict[str, Any] = {
        # RuntimeEndpoint picks a chat template by this name: the public Hugging Face id says
        # the most about the template without showing the upstream's filesystem.
        "model_path": model.hugging_face_id or model.id,
        "served_model_name": model.id,
        "is_generation": True,
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "context_length": model.context_length,
        "max_completion_tokens": model.max_completion_tokens,
    }
    if limits.vocab_size is not None:
        info["vocab_size"] = limits.vocab_size
    return info
