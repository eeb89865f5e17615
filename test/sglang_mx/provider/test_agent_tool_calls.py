"""Agents end to end on the default model (issue 44, item 4): `sglang-mx serve`'s model and
arguments plus GLM's parsers (`--tool-call-parser glm47 --reasoning-parser glm45`, as the GLM-5.x
recipes pass them). OpenAI `tools` / `tool_choice` in, parsed `tool_calls` out, streamed as OpenAI
streams them; the reasoning block split off; the agent loop's second turn hitting the prefix
cache; and the same through the provider, billed."""

from __future__ import annotations

import json

import httpx
import pytest
from provider_support import MODEL_ID, expected_cost, priced_provider
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger

pytestmark = pytest.mark.server

PARSERS = ("--tool-call-parser", "glm47", "--reasoning-parser", "glm45")
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search_files",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER, SEARCH]
ASK = [{"role": "user", "content": "Get the weather in Paris."}]


@pytest.fixture(scope="module")
def agent_server():
    from sglang_mx_lab.testing.server import default_serve_args, start_server

    model, args = default_serve_args()
    handle = start_server(model, [*args, *PARSERS])
    try:
        yield handle.base_url
    finally:
        handle.stop()


def chat(url: str, messages, headers=None, **body) -> dict:
    r = httpx.post(
        url + "/v1/chat/completions",
        json={"model": body.pop("model", "default"), "messages": messages, "temperature": 0,
              "max_tokens": 96, **body},
        headers=headers, timeout=180,
    )  # fmt: skip
    assert r.status_code == 200, r.text
    return r.json()


def stream_chat(url: str, messages, headers=None, **body) -> list[dict]:
    payload = {"model": body.pop("model", "default"), "messages": messages, "temperature": 0,
               "max_tokens": 96, "stream": True, **body}  # fmt: skip
    chunks = []
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json=payload, headers=headers, timeout=180
    ) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                chunks.append(json.loads(line[5:]))
    return chunks


def check_call(call: dict, tools=TOOLS) -> dict:
    """An OpenAI tool call naming an offered tool, its arguments a JSON object of that tool's
    parameters; returns the arguments."""
    assert call["type"] == "function" and call["id"]
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    assert call["function"]["name"] in schemas, call
    args = json.loads(call["function"]["arguments"])
    assert isinstance(args, dict)
    assert set(args) <= set(schemas[call["function"]["name"]]["properties"]), args
    return args


def streamed_message(chunks: list[dict]) -> dict:
    """The message a client rebuilds from OpenAI chat chunks: content and reasoning joined, tool
    calls by index (id, type and name from their first delta, arguments from the fragments)."""
    content, reasoning, calls, finish = "", "", {}, None
    for c in chunks:
        for choice in c.get("choices", []):
            d = choice.get("delta") or {}
            content += d.get("content") or ""
            reasoning += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], {"function": {"arguments": ""}, "deltas": 0})
                slot["deltas"] += 1
                if tc.get("id"):
                    assert "id" not in slot, f"id sent twice: {tc}"
                    slot["id"] = tc["id"]
                if tc.get("type"):  # SGLang repeats it on argument deltas; it may not change
                    assert slot.setdefault("type", tc["type"]) == tc["type"], tc
                fn = tc.get("function") or {}
                if fn.get("name"):
                    assert "name" not in slot["function"], f"name sent twice: {tc}"
                    slot["function"]["name"] = fn["name"]
                slot["function"]["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {"content": content, "reasoning": reasoning, "finish": finish,
            "tool_calls": [calls[i] for i in sorted(calls)]}  # fmt: skip


def test_offered_tools_returns_parsed_tool_call_with_reasoning(agent_server) -> None:
    out = chat(agent_server, ASK, tools=TOOLS)
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    msg = choice["message"]
    (call,) = msg["tool_calls"]
    args = check_call(call)
    assert call["function"]["name"] == "get_weather" and args.get("location"), call
    # thinking is on by default with tools: the reasoning block is split off, not in content
    assert msg["reasoning_content"] and "</think>" not in msg["reasoning_content"]
    assert "<tool_call>" not in (msg["content"] or "") and "<think>" not in (msg["content"] or "")
    assert out["usage"]["completion_tokens"] > 0


def test_tool_call_streams_as_openai_deltas(agent_server) -> None:
    whole = chat(agent_server, ASK, tools=TOOLS)["choices"][0]["message"]
    chunks = stream_chat(agent_server, ASK, tools=TOOLS)
    got = streamed_message(chunks)
    assert got["finish"] == "tool_calls"
    (call,) = got["tool_calls"]
    check_call(call)
    # the same call as the unary reply, its arguments sent in more than one fragment
    assert call["function"]["name"] == whole["tool_calls"][0]["function"]["name"]
    assert json.loads(call["function"]["arguments"]) == json.loads(
        whole["tool_calls"][0]["function"]["arguments"]
    )
    assert call["deltas"] >= 2
    assert got["reasoning"] == whole["reasoning_content"]


def test_thinking_off_and_named_tool_choice(agent_server) -> None:
    out = chat(agent_server, ASK, tools=TOOLS, chat_template_kwargs={"enable_thinking": False})
    msg = out["choices"][0]["message"]
    (call,) = msg["tool_calls"]
    check_call(call)
    assert not msg.get("reasoning_content")
    named = {"type": "function", "function": {"name": "search_files"}}
    out = chat(agent_server, ASK, tools=TOOLS, tool_choice=named)
    calls = out["choices"][0]["message"]["tool_calls"]
    assert calls and all(c["function"]["name"] == "search_files" for c in calls)
    for c in calls:
        check_call(c)


def test_tool_choice_none_answers_in_text(agent_server) -> None:
    out = chat(agent_server, ASK, tools=TOOLS, tool_choice="none", max_tokens=24)
    msg = out["choices"][0]["message"]
    assert not msg.get("tool_calls") and out["choices"][0]["finish_reason"] in ("stop", "length")


def test_agent_loop_tool_result_then_answer_from_cache(agent_server) -> None:
    first = chat(agent_server, ASK, tools=TOOLS)
    call = first["choices"][0]["message"]["tool_calls"][0]
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": '{"temperature": 21}'},
    ]
    second = chat(agent_server, history, tools=TOOLS)
    choice = second["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["content"], choice
    assert not choice["message"].get("tool_calls")
    # the second call re-sends the first prompt: its whole 64-token pages come from the cache
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= (first["usage"]["prompt_tokens"] - 8) // 64 * 64 > 0, second["usage"]


def test_thinking_on_without_tools_splits_reasoning(agent_server) -> None:
    code = [{"role": "user", "content": "def parse(text):\n    items = []\n    for line in"}]
    out = chat(agent_server, code, chat_template_kwargs={"enable_thinking": True})
    msg = out["choices"][0]["message"]
    assert msg["reasoning_content"] and msg["content"], msg


@pytest.fixture(scope="module")
def provider(agent_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agent-provider")
    db = tmp / "provider.sqlite"
    _, key = KeyStore(db).create("agent")
    with priced_provider(agent_server, tmp, db) as prov:
        yield prov | {"headers": {"Authorization": f"Bearer {key}"}}


def test_provider_streams_tool_call_and_bills_it(provider) -> None:
    h = provider["headers"]
    chunks = stream_chat(provider["url"], ASK, headers=h, model=MODEL_ID, tools=TOOLS)
    got = streamed_message(chunks)
    assert got["finish"] == "tool_calls"
    (call,) = got["tool_calls"]
    check_call(call)
    assert got["reasoning"]
    # OpenRouter's name for the reasoning text rides beside SGLang's
    assert "".join(
        (ch.get("delta") or {}).get("reasoning") or "" for c in chunks for ch in c["choices"]
    ) == got["reasoning"]  # fmt: skip
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens"] > 0
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert usage["cost"] == pytest.approx(
        expected_cost(usage["prompt_tokens"], usage["completion_tokens"], cached), rel=1e-9
    )
    row = Ledger(provider["db"]).get(chunks[-1]["id"])
    assert row.status == "ok" and row.completion_tokens == usage["completion_tokens"]
    assert row.cost == pytest.approx(usage["cost"])


def test_provider_unary_tool_call_and_reasoning(provider) -> None:
    out = chat(provider["url"], ASK, headers=provider["headers"], model=MODEL_ID, tools=TOOLS)
    msg = out["choices"][0]["message"]
    (call,) = msg["tool_calls"]
    check_call(call)
    assert msg["reasoning"] == msg["reasoning_content"] and msg["reasoning"]
    assert out["usage"]["cost"] > 0


def test_bench_agents_tool_calls_program_through_the_provider(provider) -> None:
    from sglang_mx.bench.agents import tool_calls

    key = provider["headers"]["Authorization"].split()[1]
    row = tool_calls.run(provider["url"], key, sessions=1, max_tokens=128, tasks=2)
    # two tasks, each a call and, when it called a tool, an answer after the result; the second
    # task re-sends the first's transcript
    assert row["tool_calls"] + row["untooled_turns"] == 2 and row["tool_calls"] >= 1, row
    assert row["calls"] == 2 + row["tool_calls"], row
    assert row["cached_tokens"] > 0 and 0 < row["cached_ratio"] < 1
    assert row["cost_usd"] > 0 and row["cost_usd_per_run"] == row["cost_usd"]


@pytest.mark.filterwarnings("ignore:.*DEPRECATED.*:DeprecationWarning")  # SDK's rate_limit field
def test_openrouter_sdk_agent_round_trip(provider) -> None:
    """OpenRouter's Python SDK pointed at the provider's /api/v1 (test_openrouter_sdk.py does the
    rest against a scripted upstream): a tool call with reasoning, the tool result back as a
    `tool` message, an answer; reasoning turned off; the generation and the key read back."""
    from openrouter import OpenRouter
    from openrouter.utils import RetryConfig

    key = provider["headers"]["Authorization"].split()[1]
    no_retry = RetryConfig("none", None, False)
    client = OpenRouter(  # the SDK's default is httpx's 5 s, short for a CPU decode of 96 tokens
        api_key=key, server_url=provider["url"] + "/api/v1", retry_config=no_retry,
        timeout_ms=180_000,
    )  # fmt: skip
    sampling = {"model": MODEL_ID, "tools": TOOLS, "temperature": 0, "max_tokens": 96}
    first = client.chat.send(messages=ASK, **sampling)
    msg = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls" and msg.reasoning, first
    (call,) = msg.tool_calls
    args = check_call(call.model_dump())
    assert call.function.name == "get_weather" and args.get("location")
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'},
    ]
    second = client.chat.send(messages=history, **sampling)
    assert second.choices[0].finish_reason == "stop" and second.choices[0].message.content
    off = client.chat.send(messages=ASK, reasoning={"effort": "none"}, **sampling)
    assert off.choices[0].message.tool_calls and not off.choices[0].message.reasoning
    ledger = Ledger(provider["db"])
    for res in (first, second, off):
        gen = client.generations.get_generation(id=res.id).data
        row = ledger.get(res.id)
        assert gen.total_cost == row.cost == pytest.approx(res.usage.cost, rel=1e-12)
        assert gen.native_tokens_completion == res.usage.completion_tokens
        assert gen.native_tokens_reasoning == res.usage.completion_tokens_details.reasoning_tokens
        assert gen.finish_reason == res.choices[0].finish_reason
    assert client.generations.get_generation(id=first.id).data.native_tokens_reasoning > 0
    assert client.generations.get_generation(id=off.id).data.native_tokens_reasoning == 0
    usage = client.api_keys.get_current_key_metadata().data.usage
    key_rows = ledger.rows(ledger.get(first.id).key_id)
    assert usage == pytest.approx(sum(r.cost for r in key_rows), rel=1e-12) and usage > 0
