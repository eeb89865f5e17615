"""Generated hostile requests (hypothesis strategies) for SGLang's routes and the provider's,
and the check every answer must pass: no 5xx, no traceback, and the server still generates.

A request starts from a small valid body for its route; one to three fields (known ones of
that route, or unknown names) get hostile values: wrong types, out-of-range and huge/negative
numbers, token ids at and beyond the vocabulary, empty and enormous lists, deep nesting,
invalid regexes/JSON schemas/EBNF grammars, bad tools and content parts. Then the encoding can
be broken: truncated JSON, a non-object document, a wrong content type.

Values that are *valid* but slow (a long generation) are avoided: lengths get only values the
server must refuse, so a bounded run stays bounded. Requests are plain data (`HostileRequest`),
saved as JSON regression cases and replayed by the test suite.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import httpx
from hypothesis import strategies as st

from sglang_mx_lab.testing.liveness import generates

SGLANG_ROUTES = ("/generate", "/v1/completions", "/v1/chat/completions")
PROVIDER_ROUTES = ("/v1/completions", "/v1/chat/completions")
PROVIDER_NATIVE_ROUTES = ("/generate",)  # the provider's native route for sgl.RuntimeEndpoint


@dataclass(frozen=True)
class HostileRequest:
    route: str
    body: str  # the exact bytes sent, as text
    content_type: str = "application/json"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostileRequest:
        return cls(data["route"], data["body"], data.get("content_type", "application/json"))


@dataclass(frozen=True)
class Target:
    """What the generator needs to know about the served model."""

    model: str
    vocab_size: int
    context_length: int


# --- values ---------------------------------------------------------------------------------


def _big_ints() -> st.SearchStrategy[int]:
    return st.sampled_from(
        [-(2**63) - 1, -(2**63), -(2**31) - 1, -1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63,
         2**64, 10**30]
    )  # fmt: skip


def token_ids(t: Target) -> st.SearchStrategy[int]:
    """Ids at the edges of the vocabulary, inside and out."""
    v = t.vocab_size
    return st.one_of(
        st.sampled_from([0, 1, v - 1, v, v + 1, -1, -v]),
        st.integers(min_value=-(2**64), max_value=2**64),
        _big_ints(),
    )


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        _big_ints(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([1e308, -1e308, 5e-324, -0.0, 0.5, 1.5]),
        st.text(max_size=20),
        st.sampled_from(["", "\x00", "🦀" * 50, "a" * 5000, "-1", "1e9", "null", "[]", "{}"]),
    )


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)
        ),
        max_leaves=max_leaves,
    )


def deep_nesting() -> st.SearchStrategy[Any]:
    def nest(depth: int, kind: str) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = [value] if kind == "list" else {"a": value}
        return value

    return st.builds(nest, st.sampled_from([64, 500]), st.sampled_from(["list", "dict"]))


def id_lists(t: Target) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(token_ids(t), min_size=0, max_size=6),
        st.lists(st.lists(token_ids(t), max_size=3), min_size=1, max_size=3),
        st.just([]),
        st.builds(lambda n: [1] * n, st.sampled_from([t.context_length, t.context_length + 1])),
        st.builds(lambda n: list(range(n)), st.sampled_from([t.vocab_size + 1])),
    )


_BAD_REGEX = ["(", "[a-", "a{99999999}", "(?<!x)y", "\\", "(a|b", "a**", "[z-a]",
              "(?P<x>a)(?P<x>b)", "((((((((((a))))))))))*" * 20, ""]  # fmt: skip
_BAD_SCHEMA = ["{", "[]", "null", '{"type": "nope"}', '{"type": "object", "properties": 5}',
               '{"$ref": "#/nowhere"}', '{"type": "string", "pattern": "("}',
               '{"type": "array", "minItems": 99999999}', '{"enum": []}',
               json.dumps({"type": "object", "properties": {"a": {"$ref": "#"}}}),
               '{"type": "integer", "minimum": 5, "maximum": 1}']  # fmt: skip
_BAD_EBNF = ["root ::= ", "root ::= missing", "root ::= (", "x ::= \"a\"", "root ::= \"a\" |",
             "root ::= [z-a]", "root ::= root"]  # fmt: skip


def grammars() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(_BAD_REGEX + _BAD_SCHEMA + _BAD_EBNF), json_values(6))


def tools() -> st.SearchStrategy[Any]:
    fn = st.fixed_dictionaries(
        {"name": st.one_of(st.text(max_size=10), scalars())},
        optional={
            "parameters": st.one_of(
                st.sampled_from([json.loads(s) for s in _BAD_SCHEMA[1:]]), json_values(6)
            ),  # fmt: skip
            "description": scalars(),
            "strict": scalars(),
        },
    )
    tool = st.fixed_dictionaries(
        {"type": st.sampled_from(["function", "code", "", 5])}, optional={"function": fn}
    )
    return st.one_of(st.lists(tool, max_size=3), json_values(6))


def content_parts() -> st.SearchStrategy[Any]:
    part = st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": scalars()}),
        st.fixed_dictionaries(
            {
                "type": st.just("image_url"),
                "image_url": st.one_of(
                    st.fixed_dictionaries(
                        {
                            "url": st.sampled_from(
                                [
                                    "",
                                    "data:image/png;base64,AAAA",
                                    "data:image/png;base64,!!",
                                    "file:///etc/passwd",
                                    "http://127.0.0.1:1/x.png",
                                ]
                            )
                        }
                    ),
                    scalars(),
                ),
            }  # fmt: skip
        ),
        st.fixed_dictionaries(
            {"type": st.sampled_from(["input_audio", "video_url", "file", "weird", ""])}
        ),  # fmt: skip
        json_values(6),
    )
    return st.one_of(st.lists(part, max_size=4), scalars(), deep_nesting())


def messages() -> st.SearchStrategy[Any]:
    msg = st.fixed_dictionaries(
        {
            "role": st.one_of(
                st.sampled_from(
                    ["user", "assistant", "system", "tool", "developer", "function", "", "root"]
                ),
                scalars(),
            ),  # fmt: skip
            "content": st.one_of(st.text(max_size=30), content_parts()),
        },
        optional={
            "tool_calls": json_values(6),
            "name": scalars(),
            "tool_call_id": scalars(),
            "reasoning_content": scalars(),
        },  # fmt: skip
    )
    return st.one_of(st.lists(msg, min_size=0, max_size=4), json_values(6), deep_nesting())


def _refused_lengths(t: Target) -> st.SearchStrategy[Any]:
    """Lengths the server must refuse (valid large ones would only be slow)."""
    return st.one_of(
        st.sampled_from(
            [-1, -(2**31), t.context_length + 1, 2**31, 2**63, 10**30, 1.5, "5", [], {}, True]
        ),  # fmt: skip
    )


# --- fields per route -----------------------------------------------------------------------


def _sampling_fields(t: Target, openai: bool) -> dict[str, st.SearchStrategy[Any]]:
    ids = id_lists(t)
    length = _refused_lengths(t)
    fields = {
        "temperature": scalars(), "top_p": scalars(), "min_p": scalars(),
        "top_k": st.one_of(token_ids(t), scalars()),
        "frequency_penalty": scalars(), "presence_penalty": scalars(),
        "repetition_penalty": scalars(),
        "stop": st.one_of(scalars(), st.lists(st.text(max_size=5), max_size=40), json_values(6)),
        "stop_token_ids": st.one_of(ids, scalars()),
        "logit_bias": st.one_of(
            st.dictionaries(st.builds(str, token_ids(t)), scalars(), max_size=4),
            st.dictionaries(st.text(max_size=6), scalars(), max_size=3), json_values(6)),
        "n": st.one_of(st.sampled_from([0, -1, 10**6, 2**63]), scalars()),
        "regex": grammars(), "json_schema": grammars(), "ebnf": grammars(),
        "ignore_eos": scalars(), "skip_special_tokens": scalars(), "no_stop_trim": scalars(),
        "custom_params": json_values(6),
    }  # fmt: skip
    if openai:
        fields.update({"max_tokens": length, "min_tokens": length, "seed": scalars()})
    else:
        fields.update({"max_new_tokens": length, "min_new_tokens": length,
                       "stream_interval": scalars(), "sampling_seed": scalars(),
                       "structural_tag": grammars()})  # fmt: skip
    return fields


def _generate_fields(t: Target) -> dict[str, st.SearchStrategy[Any]]:
    ids = id_lists(t)
    return {
        "text": st.one_of(st.text(max_size=30), json_values(6), st.just("")),
        "input_ids": st.one_of(ids, scalars(), deep_nesting()),
        "return_logprob": scalars(),
        "logprob_start_len": st.one_of(token_ids(t), scalars()),
        "top_logprobs_num": st.one_of(token_ids(t), scalars()),
        "token_ids_logprob": st.one_of(ids, scalars()),
        "return_text_in_logprobs": scalars(), "stream": scalars(), "rid": scalars(),
        "priority": scalars(), "bootstrap_room": scalars(), "routed_dp_rank": scalars(),
        "data_parallel_rank": scalars(), "return_hidden_states": scalars(),
        "custom_logit_processor": scalars(), "lora_path": scalars(),
        "session_params": json_values(6),
        "routed_experts_start_len": scalars(), "return_routed_experts": scalars(),
        "image_data": json_values(6), "input_embeds": st.one_of(json_values(6), deep_nesting()),
        "modalities": json_values(6), "max_thinking_tokens": scalars(), "extra_key": scalars(),
        "cache_salt": scalars(), "sampling_params": json_values(6),
    }  # fmt: skip


def _openai_fields(t: Target, chat: bool) -> dict[str, st.SearchStrategy[Any]]:
    fields = _sampling_fields(t, openai=True)
    fields.update({
        "model": st.one_of(st.just(t.model), scalars()), "stream": scalars(),
        "stream_options": json_values(6), "response_format": st.one_of(
            st.fixed_dictionaries({"type": st.sampled_from(["json_schema", "json_object", "text",
                                                            "structural_tag", "x"])},  # fmt: skip
                                  optional={"json_schema": json_values(6)}), json_values(6)),
        "user": scalars(), "priority": scalars(), "rid": scalars(), "bootstrap_room": scalars(),
        "routed_dp_rank": scalars(), "return_hidden_states": scalars(), "lora_path": scalars(),
    })  # fmt: skip
    if chat:
        fields.update({
            "messages": messages(), "tools": tools(), "tool_choice": json_values(6),
            "logprobs": scalars(), "top_logprobs": st.one_of(token_ids(t), scalars()),
            "max_completion_tokens": _refused_lengths(t), "reasoning_effort": scalars(),
            "chat_template_kwargs": json_values(6), "continue_final_message": scalars(),
            "separate_reasoning": scalars(), "parallel_tool_calls": scalars(),
        })  # fmt: skip
    else:
        fields.update({
            "prompt": st.one_of(id_lists(t), st.text(max_size=30), scalars(), deep_nesting(),
                                st.lists(st.text(max_size=5), max_size=3)),
            "logprobs": st.one_of(token_ids(t), scalars()), "echo": scalars(),
            "suffix": scalars(), "best_of": scalars(),
        })  # fmt: skip
    return fields


def _base_body(route: str, t: Target) -> dict[str, Any]:
    if route == "/generate":
        return {"text": "Hello", "sampling_params": {"max_new_tokens": 2, "temperature": 0}}
    body: dict[str, Any] = {"model": t.model, "max_tokens": 2, "temperature": 0}
    if route == "/v1/chat/completions":
        body["messages"] = [{"role": "user", "content": "Hello"}]
    else:
        body["prompt"] = "Hello"
    return body


# Strategies are built once per route and model (building them costs more than a draw).
@lru_cache(maxsize=16)
def _nested_sampling_fields(t: Target) -> dict[str, st.SearchStrategy[Any]]:
    return _sampling_fields(t, openai=False)


@lru_cache(maxsize=64)
def _fields(route: str, t: Target) -> dict[str, st.SearchStrategy[Any]]:
    if route == "/generate":  # sampling fields are drawn too, and nested by hostile_bodies
        return {**_generate_fields(t), **_nested_sampling_fields(t)}
    return _openai_fields(t, chat=route == "/v1/chat/completions")


@st.composite
def hostile_bodies(draw, route: str, t: Target) -> dict[str, Any]:
    body = _base_body(route, t)
    fields = _fields(route, t)
    names = draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=3, unique=True))
    nested = _nested_sampling_fields(t)
    for name in names:
        value = draw(fields[name])
        params = body.get("sampling_params")
        # /generate nests sampling fields, unless a hostile `sampling_params` drawn earlier
        # replaced the object (a list, a string ...): then the field goes at the top level.
        if route == "/generate" and name in nested and isinstance(params, dict):
            params[name] = value
        else:
            body[name] = value
    if draw(st.integers(0, 9)) == 0:  # an unknown field now and then
        body[draw(st.text(min_size=1, max_size=12))] = draw(json_values(4))
    return body


def _encode(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False)


@st.composite
def hostile_requests(draw, routes: tuple[str, ...], t: Target) -> HostileRequest:
    route = draw(st.sampled_from(routes))
    body = draw(hostile_bodies(route, t))
    form = draw(
        st.sampled_from(["json"] * 12 + ["truncated", "not_object", "content_type", "deep"])
    )
    text = _encode(body)
    if form == "deep":  # deeper than any JSON encoder here would write: built as text
        depth = draw(st.sampled_from([5_000, 100_000]))
        key = draw(st.sampled_from(sorted(body)))
        return HostileRequest(route, text[:-1] + f', "{key}": ' + "[" * depth + "]" * depth + "}")
    if form == "truncated":
        cut = draw(st.integers(0, max(0, len(text) - 1)))
        return HostileRequest(route, text[:cut])
    if form == "not_object":
        return HostileRequest(route, _encode(draw(st.one_of(scalars(), st.lists(scalars())))))
    if form == "content_type":
        ctype = draw(st.sampled_from(["text/plain", "application/x-www-form-urlencoded",
                                      "multipart/form-data", ""]))  # fmt: skip
        return HostileRequest(route, text, ctype)
    return HostileRequest(route, text)


# --- the check ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    status: int | None  # None: no HTTP answer (connection dropped, timeout)
    text: str
    healthy: bool
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def failure(self) -> str | None:
        if not self.healthy:
            return "worker_death"
        if self.status is None:
            return f"no_answer: {self.error}"
        if self.status >= 500:
            return f"http_{self.status}"
        if "Traceback (most recent call last)" in self.text or 'File "/' in self.text:
            return "traceback"  # or a frame of one: a source path sent to the client
        return None


def send(
    client: httpx.Client, base_url: str, req: HostileRequest, headers: dict[str, str] | None = None
) -> tuple[int | None, str, str]:
    hdrs = dict(headers or {})
    if req.content_type:
        hdrs["content-type"] = req.content_type
    try:
        r = client.post(base_url + req.route, content=req.body.encode(), headers=hdrs)
        return r.status_code, r.text[:4000], ""
    except httpx.HTTPError as e:
        return None, "", f"{type(e).__name__}: {e}"[:300]


def attack(
    client: httpx.Client,
    base_url: str,
    req: HostileRequest,
    sglang_url: str,
    headers: dict[str, str] | None = None,
) -> Outcome:
    """Send `req` to base_url (SGLang or the provider), then check the SGLang worker."""
    status, text, error = send(client, base_url, req, headers)
    return Outcome(status, text, generates(client, sglang_url), error)
