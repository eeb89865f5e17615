"""Request guards: check every field that carries a token id, a length, a count or an index
against the served model's facts before the request reaches the scheduler.

SGLang 0.5.23 forwards some of these unchecked, and the scheduler process dies on them (an
out-of-vocabulary prompt token is an IndexError in the embedding; more top log-probs than the
vocabulary holds is a failed top-k), taking the whole server with it. A violation raises
`GuardViolation`, a ValueError: SGLang's `/generate` and OpenAI routes turn a ValueError raised
during request validation into a 400 whose message names the field and the limit.

Pure functions over plain values; `guards.hooks` wires them into SGLang's
tokenizer manager; the provider (`provider/guards.py`) reuses the token-id checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

INT64_MAX = 2**63 - 1
# A count the scheduler turns into tensors or loops; far above anything a real request needs.
MAX_PARALLEL_SAMPLES = 128
MAX_STOP_TOKEN_IDS = 1024
# The sampler keeps top_k in an int32 tensor (2**31 kills the scheduler); SGLang itself uses
# 1 << 30 for "the whole vocabulary", so anything up to that means the same.
MAX_TOP_K = 1 << 30


class GuardViolation(ValueError):
    """A request field outside what the served model can take. `status_code` is read by
    SGLang's `/generate` error response; the message names the field and the limit."""

    status_code = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"`{field}` {message}")
        self.field = field


@dataclass(frozen=True)
class ModelLimits:
    vocab_size: int
    context_length: int


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_token_ids(field: str, ids: Any, vocab_size: int, *, allow_empty: bool = True) -> None:
    """Every element an integer token id in [0, vocab_size)."""
    if not isinstance(ids, (list, tuple, set, frozenset)):
        # A multimodal processor may hand back an array or tensor; a client cannot.
        try:
            ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        except TypeError:
            raise GuardViolation(field, "must be a list of integer token ids") from None
    if not ids:
        if allow_empty:
            return
        raise GuardViolation(field, "must not be empty: the prompt has no tokens")
    # One C-level pass for the types (bool is not int here), two for the range.
    if not set(map(type, ids)) <= {int}:
        raise GuardViolation(field, "must contain only integer token ids")
    lo, hi = min(ids), max(ids)
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise GuardViolation(
            field, f"contains token id {bad} outside the vocabulary [0, {vocab_size})"
        )


def check_int(field: str, value: Any, lo: int, hi: int) -> None:
    """An integer in [lo, hi] (None passes: the field is unset)."""
    if value is None:
        return
    if not _is_int(value):
        raise GuardViolation(field, f"must be an integer in [{lo}, {hi}]")
    if not lo <= value <= hi:
        raise GuardViolation(field, f"={value} is outside [{lo}, {hi}]")


def _int_or_str_key(key: Any) -> int | None:
    if _is_int(key):
        return key
    if isinstance(key, str):
        try:
            return int(key.strip())
        except ValueError:
            return None
    return None


def check_logit_bias(field: str, bias: Any, vocab_size: int) -> None:
    if bias is None:
        return
    if not isinstance(bias, Mapping):
        raise GuardViolation(field, "must map token ids to numbers")
    for key in bias:
        token = _int_or_str_key(key)
        if token is None:
            raise GuardViolation(field, f"key {str(key)[:40]!r} is not an integer token id")
        if not 0 <= token < vocab_size:
            raise GuardViolation(field, f"key {token} is outside the vocabulary [0, {vocab_size})")


def check_sampling_params(params: Any, limits: ModelLimits, prefix: str = "sampling_params"):
    """Fields of SGLang's `sampling_params` that index the vocabulary or size the work."""
    if params is None:
        return
    if not isinstance(params, Mapping):
        raise GuardViolation(prefix, "must be an object")
    vocab, ctx = limits.vocab_size, limits.context_length
    stop_ids = params.get("stop_token_ids")
    if stop_ids is not None:
        if isinstance(stop_ids, (list, tuple, set)) and len(stop_ids) > MAX_STOP_TOKEN_IDS:
            raise GuardViolation(
                f"{prefix}.stop_token_ids", f"holds over {MAX_STOP_TOKEN_IDS} token ids"
            )
        # SGLang drops None entries itself; everything else must be a vocabulary id.
        ids = [t for t in stop_ids if t is not None] if isinstance(stop_ids, list) else stop_ids
        check_token_ids(f"{prefix}.stop_token_ids", ids, vocab)
    check_logit_bias(f"{prefix}.logit_bias", params.get("logit_bias"), vocab)
    top_k = params.get("top_k")
    if top_k is not None and top_k != -1:
        check_int(f"{prefix}.top_k", top_k, 1, MAX_TOP_K)
    check_int(f"{prefix}.n", params.get("n"), 1, MAX_PARALLEL_SAMPLES)
    check_int(f"{prefix}.max_new_tokens", params.get("max_new_tokens"), 0, ctx)
    check_int(f"{prefix}.min_new_tokens", params.get("min_new_tokens"), 0, ctx)
    check_int(f"{prefix}.stream_interval", params.get("stream_interval"), 1, ctx)
    check_int(f"{prefix}.beam_width", params.get("beam_width"), 1, MAX_PARALLEL_SAMPLES)


# SessionParams(**session_params) is built after validation: an unknown key or a wrong type is
# a TypeError there, a 500. Its fields and the types they take:
_SESSION_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,), "rid": (str,), "offset": (int,), "replace": (bool,),
    "drop_previous_output": (bool,),
}  # fmt: skip


def check_session_params(params: Any, limits: ModelLimits) -> None:
    if params is None:
        return
    if not isinstance(params, Mapping):
        raise GuardViolation("session_params", "must be an object")
    for key, value in params.items():
        types = _SESSION_FIELDS.get(key)
        if types is None:
            known = ", ".join(_SESSION_FIELDS)
            raise GuardViolation("session_params", f"has unknown key {str(key)[:40]!r} "
                                 f"(known: {known})")  # fmt: skip
        if value is None:
            continue
        if key == "offset":
            check_int("session_params.offset", value, 0, limits.context_length)
        elif not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise GuardViolation(f"session_params.{key}", f"must be a {types[0].__name__}")


def check_generate_shape(obj: Any) -> None:
    """A /generate request's shape, before SGLang's `normalize_batch_and_arguments` indexes it
    (an empty `sampling_params` list or a non-integer `n` is an IndexError/TypeError there, a
    500)."""
    params = getattr(obj, "sampling_params", None)
    rows = params if isinstance(params, list) else [params]
    if isinstance(params, list) and not params:
        raise GuardViolation("sampling_params", "must be an object or a non-empty list of them")
    for row in rows:
        if row is None:
            continue
        if not isinstance(row, Mapping):
            raise GuardViolation("sampling_params", "must be an object or a list of objects")
        check_int("sampling_params.n", row.get("n"), 1, MAX_PARALLEL_SAMPLES)
        check_int("sampling_params.beam_width", row.get("beam_width"), 1, MAX_PARALLEL_SAMPLES)
    embeds = getattr(obj, "input_embeds", None)
    if embeds is not None and getattr(obj, "text", None) is None:
        if getattr(obj, "input_ids", None) is None and not (
            isinstance(embeds, list) and embeds and isinstance(embeds[0], list) and embeds[0]
        ):
            raise GuardViolation("input_embeds", "must be a non-empty list of embedding rows")


def check_generate(obj: Any, input_ids: Any, limits: ModelLimits) -> None:
    """One (already split) GenerateReqInput or EmbeddingReqInput and its prompt token ids."""
    vocab, ctx = limits.vocab_size, limits.context_length
    if input_ids is not None:
        # An empty prompt reaches the model as a zero-token batch and kills the scheduler
        # (SGLang refuses it only when no `text` came along).
        # Session history or an image processor may supply the whole prompt.
        mm = getattr(obj, "contains_mm_input", None)
        session = getattr(obj, "session_params", None)
        in_session = isinstance(session, Mapping) and bool(session.get("id"))
        check_token_ids("input_ids", input_ids, vocab, allow_empty=bool(mm and mm()) or in_session)
    # input_embeds requests carry no ids: then only the context bounds the start.
    n_prompt = len(input_ids) if hasattr(input_ids, "__len__") else ctx
    check_sampling_params(getattr(obj, "sampling_params", None), limits)
    top = getattr(obj, "top_logprobs_num", None)
    check_int("top_logprobs_num", top, 0, vocab)
    start = getattr(obj, "logprob_start_len", None)
    check_int("logprob_start_len", start, -1, n_prompt)
    token_ids_logprob = getattr(obj, "token_ids_logprob", None)
    if token_ids_logprob:
        check_token_ids("token_ids_logprob", token_ids_logprob, vocab)
    check_session_params(getattr(obj, "session_params", None), limits)
    check_int("routed_experts_start_len", getattr(obj, "routed_experts_start_len", None), 0, ctx)
    check_int("max_thinking_tokens", getattr(obj, "max_thinking_tokens", None), 0, ctx)
    for name in ("priority", "bootstrap_room"):
        check_int(name, getattr(obj, name, None), -INT64_MAX - 1, INT64_MAX)
    check_int("bootstrap_port", getattr(obj, "bootstrap_port", None), 0, 65535)
