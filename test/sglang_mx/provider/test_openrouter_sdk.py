"""OpenRouter's official Python SDK (`openrouter`, pinned in the dev extra) against the provider's
`/api/v1`, as an app written for OpenRouter would use it after changing its base URL: chat
(unary, streamed, a tool call round trip, reasoning on and off), the model list and detail, the
key's metadata, a generation lookup, and every error status the provider returns raised as the
SDK's typed error. The SDK validates each response with its own pydantic models (written from
OpenRouter's published schema, not from our code): a field we omit or mistype fails the call.

The provider runs in this process in front of the scripted upstream (`provider_fake_upstream`):
the provider code under test is the same as in front of SGLang; a real server's round trip is
in test_agent_tool_calls.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from openrouter import OpenRouter, errors
from openrouter.utils import RetryConfig
from provider_fake_upstream import provider_on_fake
from provider_support import MODEL_ID, PRICES, expected_cost
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger

# The SDK marks `rate_limit` of the key metadata deprecated and warns whenever it parses one.
pytestmark = pytest.mark.filterwarnings("ignore:.*DEPRECATED.*:DeprecationWarning")
# @openrouter/sdk, installed by `make setup` (scripts/setup.sh) where npm is reachable.
NODE_SDK = Path(sys.prefix) / "node/node_modules/@openrouter/sdk/esm/index.js"
NODE_CHECK = Path(__file__).with_name("openrouter_sdk_check.mjs")
NO_RETRY = RetryConfig("none", None, False)  # the SDK retries 5xx for up to an hour by default
ASK = [{"role": "user", "content": "Hello"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"],
        },
    },
}


@pytest.fixture(scope="module")
def prov(tmp_path_factory):
    with provider_on_fake(tmp_path_factory.mktemp("sdk"), keepalive_s=0.2) as p:
        yield p | {"base": p["url"] + "/api/v1"}


def sdk(prov, key: str | None = None) -> OpenRouter:
    return OpenRouter(
        api_key=key or prov["key"], server_url=prov["base"], retry_config=NO_RETRY,
        timeout_ms=60_000,  # httpx's default 5 s is short on a shared 2-core box
    )  # fmt: skip


def new_key(prov, **limits) -> str:
    return KeyStore(prov["db"]).create("sdk-test", **limits)[1]


def key_id(plain: str) -> str:
    return plain.split("-")[2]  # sk-mx-<id>-<secret>


def sent_bodies(prov) -> list[dict]:
    return httpx.get(prov["upstream"] + "/bodies", timeout=10).json()["bodies"]


# --- chat ----------------------------------------------------------------------------------


def test_unary_chat_validates_and_is_billed(prov) -> None:
    res = sdk(prov).chat.send(model=MODEL_ID, messages=ASK, max_tokens=4)
    assert res.object == "chat.completion" and res.model == MODEL_ID and res.id.startswith("gen-")
    (choice,) = res.choices
    assert choice.message.content == "tttt" and choice.finish_reason == "length"
    u = res.usage
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens) == (7, 4, 11)
    assert u.prompt_tokens_details.cached_tokens == 3
    assert u.cost == pytest.approx(expected_cost(7, 4, 3), rel=1e-12)
    assert u.cost_details.upstream_inference_prompt_cost + (
        u.cost_details.upstream_inference_completions_cost
    ) == pytest.approx(u.cost, rel=1e-12)
    row = Ledger(prov["db"]).get(res.id)
    assert row.status == "ok" and row.cost == pytest.approx(u.cost, rel=1e-12)


def test_unary_body_has_openrouter_fields(prov) -> None:
    """What the SDK's models drop (extra fields), read raw: `provider`, `system_fingerprint`
    (required, nullable), and `native_finish_reason` beside the normalized one."""
    r = httpx.post(
        prov["base"] + "/chat/completions",
        json={"model": MODEL_ID, "messages": ASK, "max_tokens": 2},
        headers={"Authorization": f"Bearer {prov['key']}"},
        timeout=30,
    )
    body = r.json()
    assert r.status_code == 200 and body["provider"] == "sglang-mx"
    assert "system_fingerprint" in body
    assert body["choices"][0]["native_finish_reason"] == "length"


def test_streamed_chat_ends_with_billed_usage(prov) -> None:
    chunks = list(sdk(prov).chat.send(model=MODEL_ID, messages=ASK, max_tokens=5, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "ttttt"
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 5
    assert last.usage.cost == pytest.approx(expected_cost(7, 5, 3), rel=1e-12)
    assert len({c.id for c in chunks}) == 1 and all(c.model == MODEL_ID for c in chunks)
    assert Ledger(prov["db"]).get(last.id).cost == pytest.approx(last.usage.cost, rel=1e-12)


def test_tool_call_round_trip(prov) -> None:
    client = sdk(prov)
    ask = [{"role": "user", "content": "TOOLCALL: weather in Paris?"}]
    first = client.chat.send(model=MODEL_ID, messages=ask, tools=[WEATHER], max_tokens=8)
    (choice,) = first.choices
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"location": "Paris"}
    history = [
        *ask,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'},
    ]
    second = client.chat.send(model=MODEL_ID, messages=history, tools=[WEATHER], max_tokens=3)
    assert second.choices[0].message.content == "ttt" and not second.choices[0].message.tool_calls
    upstream = sent_bodies(prov)[-1]
    assert upstream["messages"][-1] == {
        "role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'
    }  # fmt: skip
    assert upstream["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert upstream["tools"][0]["function"]["name"] == "get_weather"


def test_streamed_tool_call(prov) -> None:
    ask = [{"role": "user", "content": "TOOLCALL"}]
    chunks = list(sdk(prov).chat.send(model=MODEL_ID, messages=ask, tools=[WEATHER], stream=True))
    deltas = [tc for c in chunks for ch in c.choices for tc in ch.delta.tool_calls or []]
    assert deltas[0].id == "call_0" and deltas[0].function.name == "get_weather"
    args = "".join(d.function.arguments or "" for d in deltas)
    assert json.loads(args) == {"location": "Paris"}
    assert [ch.finish_reason for c in chunks for ch in c.choices][-1] == "tool_calls"


@pytest.mark.parametrize(("effort", "enabled"), [("high", True), ("max", True), ("none", False)])
def test_reasoning_on_and_off(prov, effort: str, enabled: bool) -> None:
    """The SDK's reasoning object has `effort` (and `summary`), not `enabled`: "none" is off."""
    res = sdk(prov).chat.send(
        model=MODEL_ID, messages=ASK, max_tokens=3, reasoning={"effort": effort, "summary": "auto"}
    )
    # OpenRouter's reasoning object reaches SGLang as its chat-template switch
    assert sent_bodies(prov)[-1]["chat_template_kwargs"] == {"enable_thinking": enabled}
    msg = res.choices[0].message
    assert msg.reasoning == "I think." if enabled else not msg.reasoning
    assert res.usage.completion_tokens_details.reasoning_tokens == (2 if enabled else 0)
    gen = sdk(prov).generations.get_generation(id=res.id).data
    assert gen.native_tokens_reasoning == (2 if enabled else 0)


# --- OpenRouter's own request fields --------------------------------------------------------


def test_routing_preferences_accepted_and_enforced(prov) -> None:
    client = sdk(prov)
    # preferences that choose among providers mean nothing for one; accepted, not forwarded
    prefs = {
        "order": ["sglang-mx"], "allow_fallbacks": True, "data_collection": "deny", "zdr": True,
        "quantizations": ["mxfp4", "fp8"], "max_price": {"prompt": "1", "completion": "2"},
    }  # fmt: skip
    res = client.chat.send(
        model=MODEL_ID, messages=ASK, max_tokens=1, provider=prefs, session_id="s1",
        http_headers={"X-Title": "app"},
    )  # fmt: skip
    assert res.usage.cost > 0
    upstream = sent_bodies(prov)[-1]
    assert not {"provider", "session_id", "usage", "transforms"} & set(upstream), upstream
    # the two that constrain what may serve: 404 when this provider cannot (PRICES: 0.5 / 2.0)
    with pytest.raises(errors.NotFoundResponseError) as e:
        client.chat.send(model=MODEL_ID, messages=ASK, provider={"quantizations": ["fp8"]})
    assert "mxfp4" in e.value.data.error.message
    with pytest.raises(errors.NotFoundResponseError) as e:
        client.chat.send(model=MODEL_ID, messages=ASK, provider={"max_price": {"completion": "1"}})
    assert "max_price.completion" in e.value.data.error.message


@pytest.mark.parametrize(
    "fields",
    [{"models": [MODEL_ID, "other/model"]}, {"plugins": [{"id": "web"}]}, {"top_a": 0.5}],
)
def test_openrouter_fields_not_served_are_named(prov, fields) -> None:
    with pytest.raises(errors.BadRequestResponseError) as e:
        sdk(prov).chat.send(model=MODEL_ID, messages=ASK, **fields)
    assert f"`{next(iter(fields))}`" in e.value.data.error.message


# --- models --------------------------------------------------------------------------------


def test_models_list_and_detail(prov) -> None:
    page = sdk(prov).models.list()
    (m,) = page.result.data
    assert page.result.total_count == 1
    assert m.id == MODEL_ID and m.name == "GLM tiny (MXFP4 experts)" and m.context_length == 2048
    assert m.top_provider.max_completion_tokens == 512
    # prices per token as plain decimal strings, from the file's USD per million
    assert m.pricing.prompt == "0.0000005" and m.pricing.completion == "0.000002"
    assert m.pricing.input_cache_read == "0.00000005"  # PRICES["input_cache_read"] / 1e6
    assert PRICES["input_cache_read"] == 0.05
    assert m.architecture.input_modalities == ["text"]
    assert {"temperature", "max_tokens", "response_format"} <= set(m.supported_parameters)
    assert "tools" not in m.supported_parameters  # the pricing file declares json_mode only
    author, slug = MODEL_ID.split("/")
    one = sdk(prov).models.get(author=author, slug=slug).data
    assert one.id == MODEL_ID and one.pricing == m.pricing
    with pytest.raises(errors.NotFoundResponseError):
        sdk(prov).models.get(author="nobody", slug="nothing")
    assert sdk(prov).models.list(supported_parameters="tools").result.data == []


def test_models_paging_and_bad_query(prov) -> None:
    def get(**params) -> httpx.Response:
        return httpx.get(prov["base"] + "/models", params=params, timeout=10)

    assert get(offset=1).json() == {"data": [], "total_count": 1, "links": {"next": None}}
    assert [m["id"] for m in get(limit=1).json()["data"]] == [MODEL_ID]
    for bad in ({"limit": 0}, {"limit": "x"}, {"offset": -1}):
        r = get(**bad)
        assert r.status_code == 400 and next(iter(bad)) in r.json()["error"]["message"], r.text


def test_provider_listing_stays_on_v1(prov) -> None:
    """OpenRouter's ingestion still reads the schema-2.4 provider document on /v1/models."""
    doc = httpx.get(prov["url"] + "/v1/models", timeout=10).json()["data"][0]
    assert doc["schema_version"] == "2.4" and "architecture" not in doc


# --- account ---------------------------------------------------------------------------------


def test_key_metadata_usage_is_the_ledger_sum(prov) -> None:
    plain = new_key(prov, limit_usd=1.0, rpm=500)
    client = sdk(prov, plain)
    client.chat.send(model=MODEL_ID, messages=ASK, max_tokens=3)
    list(client.chat.send(model=MODEL_ID, messages=ASK, max_tokens=6, stream=True))
    data = client.api_keys.get_current_key_metadata().data
    rows = Ledger(prov["db"]).rows(key_id(plain))
    assert len(rows) == 2
    ledger_sum = sum(r.cost for r in rows)
    assert data.usage == pytest.approx(ledger_sum, rel=1e-12)
    assert ledger_sum == pytest.approx(expected_cost(7, 3, 3) + expected_cost(7, 6, 3), rel=1e-12)
    assert data.usage_daily == data.usage_weekly == data.usage_monthly == data.usage
    assert data.label == "sdk-test" and data.limit == 1.0
    assert data.limit_remaining == pytest.approx(1.0 - ledger_sum, rel=1e-12)
    assert data.rate_limit.requests == 500 and data.is_free_tier is False


def test_generation_lookup_matches_its_ledger_row(prov) -> None:
    client = sdk(prov)
    unary = client.chat.send(model=MODEL_ID, messages=ASK, max_tokens=4)
    streamed = list(client.chat.send(model=MODEL_ID, messages=ASK, max_tokens=3, stream=True))
    ledger = Ledger(prov["db"])
    for gen_id, is_stream in ((unary.id, False), (streamed[-1].id, True)):
        g = client.generations.get_generation(id=gen_id).data
        row = ledger.get(gen_id)
        assert g.id == gen_id and g.model == MODEL_ID and g.streamed is is_stream
        assert g.total_cost == g.usage == row.cost and g.total_cost > 0
        assert (g.native_tokens_prompt, g.native_tokens_completion, g.native_tokens_cached) == (
            row.prompt_tokens, row.completion_tokens, row.cached_tokens
        )  # fmt: skip
        assert g.latency == pytest.approx((row.finished - row.created) * 1000, abs=1e-6)
        assert g.generation_time is not None and 0 <= g.generation_time <= g.latency
        assert g.cancelled is False and g.provider_name == "sglang-mx"
    assert client.generations.get_generation(id=unary.id).data.finish_reason == "length"


def test_generation_of_another_key_is_not_found(prov) -> None:
    mine = sdk(prov).chat.send(model=MODEL_ID, messages=ASK, max_tokens=1)
    other = sdk(prov, new_key(prov))
    with pytest.raises(errors.NotFoundResponseError) as e:
        other.generations.get_generation(id=mine.id)
    assert e.value.data.error.code == 404
    with pytest.raises(errors.NotFoundResponseError):
        other.generations.get_generation(id="gen-does-not-exist")
    # the same message for both: an id of another tenant is not revealed to exist
    unknown = httpx.get(
        prov["base"] + "/generation", params={"id": "gen-x"}, headers=_auth(prov), timeout=10
    ).json()
    assert "for this key" in unknown["error"]["message"]
    r = httpx.get(prov["base"] + "/generation", headers=_auth(prov), timeout=10)
    assert r.status_code == 400 and "`id` is required" in r.json()["error"]["message"]


def test_credits_are_a_clear_404(prov) -> None:
    with pytest.raises(errors.OpenRouterDefaultError) as e:  # the SDK types no 404 here
        sdk(prov).credits.get_credits()
    assert e.value.status_code == 404
    body = json.loads(e.value.body)
    assert body["error"]["metadata"]["reason"] == "credits_not_served"
    assert "GET /api/v1/key" in body["error"]["message"]


def _auth(prov) -> dict:
    return {"Authorization": f"Bearer {prov['key']}"}


# --- errors: each status the provider returns, as the SDK's typed error ---------------------


def test_400_bad_request(prov) -> None:
    with pytest.raises(errors.BadRequestResponseError) as e:
        sdk(prov).chat.send(model=MODEL_ID, messages=ASK, temperature=5.0)
    assert e.value.data.error.code == 400 and "temperature" in e.value.data.error.message


def test_401_unauthorized(prov) -> None:
    bad = sdk(prov, "sk-mx-00000000-wrong")
    with pytest.raises(errors.UnauthorizedResponseError):
        bad.chat.send(model=MODEL_ID, messages=ASK)
    with pytest.raises(errors.UnauthorizedResponseError):
        bad.api_keys.get_current_key_metadata()
    with pytest.raises(errors.UnauthorizedResponseError):
        bad.generations.get_generation(id="gen-x")


def test_402_payment_required_once_the_cap_is_spent(prov) -> None:
    client = sdk(prov, new_key(prov, limit_usd=0.0))
    with pytest.raises(errors.PaymentRequiredResponseError) as e:
        client.chat.send(model=MODEL_ID, messages=ASK, max_tokens=1)
    assert e.value.data.error.metadata["error_type"] == "payment_required"
    assert client.api_keys.get_current_key_metadata().data.limit_remaining == 0.0


def test_404_not_found(prov) -> None:
    with pytest.raises(errors.NotFoundResponseError):
        sdk(prov).generations.get_generation(id="gen-none")
    with pytest.raises(errors.NotFoundResponseError):  # a route this provider does not serve
        sdk(prov).chat.send(model=MODEL_ID, messages=ASK, server_url=prov["url"] + "/nope")


def test_413_payload_too_large(prov) -> None:
    huge = [{"role": "user", "content": "x" * (2048 * 64 + 1)}]  # past the context, in chars
    with pytest.raises(errors.PayloadTooLargeResponseError):
        sdk(prov).chat.send(model=MODEL_ID, messages=huge)


def test_429_rate_limited(prov) -> None:
    client = sdk(prov, new_key(prov, rpm=1))
    client.chat.send(model=MODEL_ID, messages=ASK, max_tokens=1)
    with pytest.raises(errors.TooManyRequestsResponseError) as e:
        client.chat.send(model=MODEL_ID, messages=ASK, max_tokens=1)
    assert int(e.value.headers["retry-after"]) > 0


def test_502_bad_gateway(prov) -> None:
    with pytest.raises(errors.BadGatewayResponseError):
        sdk(prov).chat.send(model=MODEL_ID, messages=[{"role": "user", "content": "HTTP500"}])


def test_503_service_unavailable(prov) -> None:
    with pytest.raises(errors.ServiceUnavailableResponseError):
        sdk(prov).chat.send(model=MODEL_ID, messages=[{"role": "user", "content": "HTTP503"}])


def test_mid_stream_failure_is_an_in_band_error_chunk(prov) -> None:
    """After the stream began, errors travel in-band: the SDK validates the error chunk
    (its metadata requires OpenRouter's `error_type`)."""
    cut = [{"role": "user", "content": "CUT"}]
    chunks = list(sdk(prov).chat.send(model=MODEL_ID, messages=cut, max_tokens=6, stream=True))
    err = chunks[-1]
    assert err.error.code == 502 and err.error.metadata.error_type == "provider_unavailable"
    assert err.choices[0].finish_reason == "error"
    g = sdk(prov).generations.get_generation(id=err.id).data
    assert g.finish_reason == "error" and g.streamed is True


def test_v1_base_serves_the_same_chat(prov) -> None:
    """Apps that set the OpenAI-style base (`/v1`) get bodies the SDK validates too."""
    client = OpenRouter(
        api_key=prov["key"], server_url=prov["url"] + "/v1", retry_config=NO_RETRY,
        timeout_ms=60_000,
    )  # fmt: skip
    res = client.chat.send(model=MODEL_ID, messages=ASK, max_tokens=2)
    assert res.usage.cost == pytest.approx(expected_cost(7, 2, 3), rel=1e-12)


def test_typescript_sdk_round_trip(prov) -> None:
    """The same calls through OpenRouter's TypeScript SDK (its zod schemas validate each reply);
    the values it read are checked here against the ledger."""
    if shutil.which("node") is None or not NODE_SDK.exists():
        pytest.skip(f"node or @openrouter/sdk missing ({NODE_SDK}); make setup installs it by npm")
    env = dict(os.environ, SDK_JS=str(NODE_SDK), BASE=prov["base"], MODEL=MODEL_ID)
    env["KEY"] = plain = new_key(prov)
    run = subprocess.run(
        ["node", str(NODE_CHECK)], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    ledger = Ledger(prov["db"])
    assert out["unary"]["content"] == "tttt" and out["stream"]["text"] == "ttt"
    for call in ("unary", "stream"):
        assert out[call]["cost"] == pytest.approx(ledger.get(out[call]["id"]).cost, rel=1e-12)
    assert out["tool"] == {
        "finish": "tool_calls", "name": "get_weather", "arguments": '{"location": "Paris"}',
        "answer": "tt",
    }  # fmt: skip
    assert sent_bodies(prov)[-1]["messages"][-1]["role"] == "tool"
    assert out["models"] == [{"id": MODEL_ID, "prompt": "0.0000005"}]
    rows = ledger.rows(key_id(plain))
    assert len(rows) == 4 and out["key"]["usage"] == pytest.approx(sum(r.cost for r in rows))
    assert out["generation"]["totalCost"] == ledger.get(out["unary"]["id"]).cost
    assert out["generation"]["tokensCompletion"] == 4
    assert out["unauthorized"] == "UnauthorizedResponseError"
