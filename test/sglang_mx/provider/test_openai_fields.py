"""Every field the OpenAI Chat Completions and Completions APIs document (as the installed `openai`
client types them), sent with a valid value through the provider to the session's real SGLang
server: forwarded fields must reach SGLang unchanged and be accepted by it; the rest are accepted
without forwarding, or refused with a 400 naming them, each for a stated reason
(`provider/openai_fields.py`, docs/provider.md). A recording pass-through proxy (real HTTP, no
fake answers) sits between the provider and SGLang to see what was forwarded."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
import uuid

import httpx
import pytest
from openai.types import completion_create_params as completion_params
from openai.types.chat import completion_create_params as chat_params
from provider_support import MODEL_ID, provider_process, serve_in_thread, write_pricing
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

pytestmark = pytest.mark.server

TOOL = {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}
FWD, ACCEPTED, REFUSED = "forwarded", "accepted", "refused"
# field -> (valid value, what the provider does with it); extra fields the value needs alongside.
CHAT: dict[str, tuple[object, str]] = {
    "audio": ({"voice": "alloy", "format": "wav"}, REFUSED),
    "frequency_penalty": (0.5, FWD),
    "function_call": ("auto", REFUSED),
    "functions": ([{"name": "now", "parameters": {"type": "object"}}], REFUSED),
    "logit_bias": ({"5": 1.0}, FWD),
    "logprobs": (True, FWD),
    "max_completion_tokens": (2, FWD),  # forwarded as SGLang's max_tokens, over max_tokens
    "max_tokens": (4, FWD),
    "metadata": ({"team": "a"}, ACCEPTED),
    "modalities": (["text"], ACCEPTED),
    "n": (1, ACCEPTED),
    "parallel_tool_calls": (False, FWD),
    "prediction": ({"type": "content", "content": "x"}, ACCEPTED),
    "presence_penalty": (0.5, FWD),
    "prompt_cache_key": ("conv-1", ACCEPTED),
    "prompt_cache_retention": ("in-memory", ACCEPTED),
    "reasoning_effort": ("low", FWD),
    "response_format": ({"type": "json_object"}, FWD),
    "safety_identifier": ("user-1", ACCEPTED),
    "seed": (7, FWD),
    "service_tier": ("auto", ACCEPTED),
    "stop": (["\n\n"], FWD),
    "store": (False, ACCEPTED),
    "stream": (True, FWD),
    "stream_options": ({"include_usage": True}, ACCEPTED),
    "temperature": (0.7, FWD),
    "tool_choice": ("auto", FWD),
    "tools": ([TOOL], FWD),
    "top_logprobs": (2, FWD),
    "top_p": (0.9, FWD),
    "user": ("user-1", FWD),
    "verbosity": ("medium", ACCEPTED),
    "web_search_options": ({"search_context_size": "low"}, REFUSED),
}
COMPLETION: dict[str, tuple[object, str]] = {
    "best_of": (1, FWD),
    "echo": (True, FWD),
    "frequency_penalty": (0.5, FWD),
    "logit_bias": ({"5": 1.0}, FWD),
    "logprobs": (2, FWD),
    "max_tokens": (4, FWD),
    "n": (1, ACCEPTED),
    "presence_penalty": (0.5, FWD),
    "seed": (7, FWD),
    "stop": (["\n\n"], FWD),
    "stream": (True, FWD),
    "stream_options": ({"include_usage": True}, ACCEPTED),
    "suffix": (" end", REFUSED),
    "temperature": (0.7, FWD),
    "top_p": (0.9, FWD),
    "user": ("user-1", FWD),
}
NEEDS = {
    ("chat", "top_logprobs"): {"logprobs": True},
    ("chat", "tool_choice"): {"tools": [TOOL]},
    ("chat", "stream_options"): {"stream": True},
    ("completion", "stream_options"): {"stream": True},
}
CORE = {"model", "messages", "prompt"}
# Every request sends this max_tokens; the length fields above use other values, so a request
# that kept it (or dropped the field) cannot pass as the field's own.
BASE_MAX_TOKENS = 3


def documented(module) -> set[str]:
    """The request fields the installed openai client documents for a route."""
    fields: set[str] = set()
    for cls in (module.CompletionCreateParamsNonStreaming, module.CompletionCreateParamsStreaming):
        fields |= set(typing.get_type_hints(cls, include_extras=False))
    return fields - CORE


@pytest.mark.parametrize("module,table", [(chat_params, CHAT), (completion_params, COMPLETION)])
def test_every_documented_field_is_classified(module, table) -> None:
    assert documented(module) == set(table)


@pytest.fixture(scope="module")
def through_recorder(mxfp4_server: str, tmp_path_factory):
    """provider -> recording proxy -> SGLang; yields (provider url, key, recorded bodies)."""
    recorded: list[dict] = []
    state: dict = {}

    async def proxy(request: Request):
        body = await request.body()
        if request.method == "POST" and request.url.path.startswith("/v1/"):
            recorded.append(json.loads(body))
        client = state.setdefault("client", httpx.AsyncClient(timeout=120))
        url = (
            mxfp4_server + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        )
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        upstream = await client.send(
            client.build_request(request.method, url, content=body, headers=headers), stream=True
        )
        keep = {"content-type": upstream.headers.get("content-type", "application/json")}
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            headers=keep,
            background=BackgroundTask(upstream.aclose),
        )

    app = Starlette(routes=[Route("/{path:path}", proxy, methods=["GET", "POST"])])
    tmp = tmp_path_factory.mktemp("fields")
    served = httpx.get(mxfp4_server + "/v1/models", timeout=30).json()["data"][0]
    pricing = write_pricing(tmp / "pricing.json", served["id"], context_length=2048)
    db = tmp / "p.sqlite"
    out = subprocess.run(
        [sys.executable, "-m", "sglang_mx.provider", "provider", "keys", "create"]
        + ["--db", str(db), "--name", "fields"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    key = out.strip().splitlines()[-1]
    with serve_in_thread(app) as proxy_url:
        with provider_process(proxy_url, pricing, db, "--default-rpm", "100000") as prov:
            yield prov.url, key, recorded


def _send(url: str, key: str, route: str, fields: dict, tag: str = "") -> httpx.Response:
    tag = tag or uuid.uuid4().hex[:6]
    body: dict = {"model": MODEL_ID, "max_tokens": BASE_MAX_TOKENS, **fields}
    if route == "chat":
        body.setdefault("messages", [{"role": "user", "content": f"[{tag}] Say hi."}])
        path = "/v1/chat/completions"
    else:
        body.setdefault("prompt", f"[{tag}] The river flows")
        path = "/v1/completions"
    return httpx.post(
        url + path, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120
    )


def _payload(resp: httpx.Response) -> dict:
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        events = [ln[5:].strip() for ln in resp.text.splitlines() if ln.startswith("data:")]
        assert events[-1] == "[DONE]"
        return json.loads(events[0])
    return resp.json()


@pytest.mark.parametrize(
    "route,name",
    [("chat", n) for n in sorted(CHAT)] + [("completion", n) for n in sorted(COMPLETION)],
)
def test_documented_field_is_served_as_classified(through_recorder, route: str, name: str):
    url, key, recorded = through_recorder
    value, action = (CHAT if route == "chat" else COMPLETION)[name]
    fields = {**NEEDS.get((route, name), {}), name: value}
    before = len(recorded)
    tag = uuid.uuid4().hex[:6]  # in the prompt: names this request's record
    resp = _send(url, key, route, fields, tag)
    if action == REFUSED:
        assert resp.status_code == 400, resp.text
        err = resp.json()["error"]
        assert name in err["message"] and err["metadata"]["reason"] == "unsupported_parameter"
        assert len(recorded) == before  # nothing reached SGLang
        return
    assert resp.status_code == 200, resp.text
    payload = _payload(resp)
    assert "error" not in payload
    # Exactly this request reached SGLang (a stale record from an earlier one cannot stand in).
    assert len(recorded) == before + 1, recorded[before:]
    upstream = recorded[-1]
    assert tag in json.dumps(upstream.get("messages", upstream.get("prompt"))), upstream
    if action == FWD:
        sent_as = "max_tokens" if name == "max_completion_tokens" else name
        assert upstream[sent_as] == value
        if sent_as == "max_tokens":  # and SGLang honoured it
            assert payload["usage"]["completion_tokens"] <= value, payload["usage"]
    else:
        # Not forwarded: SGLang sees no such field, or the provider's own value for it.
        assert upstream.get(name) != value


def test_route_types_reach_sglang_with_their_effect(through_recorder) -> None:
    url, key, _ = through_recorder
    # Completions: integer logprobs (top-N per position) and echo of the prompt.
    r = _send(url, key, "completion", {"logprobs": 2, "echo": True, "prompt": "The river flows"})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["text"].startswith("The river flows")
    tops = [t for t in choice["logprobs"]["top_logprobs"] if t]
    assert tops and all(len(t) <= 2 for t in tops) and any(len(t) == 2 for t in tops)
    # Chat: boolean logprobs with top_logprobs.
    r = _send(url, key, "chat", {"logprobs": True, "top_logprobs": 3})
    assert r.status_code == 200, r.text
    content = r.json()["choices"][0]["logprobs"]["content"]
    assert content and all(len(tok["top_logprobs"]) == 3 for tok in content)
