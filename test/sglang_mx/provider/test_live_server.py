"""The provider as a real process in front of the real SGLang server (session `mxfp4_server`),
driven by the official `openai` client and raw HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import openai
import pytest
from openrouter_schema import check_legacy, check_usage, check_v24
from provider_support import MODEL_ID, PRICES, abandon_stream, expected_cost, priced_provider
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.launch import provider_process
from sglang_mx.provider.ledger import Ledger

pytestmark = pytest.mark.server


def _cli_create_key(db: Path, name: str, *extra: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sglang_mx.provider",
            "provider",
            "keys",
            "create",
            "--db",
            str(db),
            "--name",
            name,
            *extra,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def live(mxfp4_server: str, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live")
    db = tmp / "provider.sqlite"
    keys = {
        "a": _cli_create_key(db, "tenant-a"),
        "b": _cli_create_key(db, "tenant-b"),
        "limited": _cli_create_key(db, "limited", "--rpm", "2"),
        "capped": _cli_create_key(db, "capped", "--limit-usd", "0.0000001"),
    }
    revoked_plain = _cli_create_key(db, "gone")
    store = KeyStore(db)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sglang_mx.provider",
            "provider",
            "keys",
            "revoke",
            "--db",
            str(db),
            store.lookup(revoked_plain).id,
        ],
        check=True,
        capture_output=True,
    )
    keys["revoked"] = revoked_plain
    with priced_provider(mxfp4_server, tmp, db) as prov:
        # max_completion: what the pricing file allows
        yield prov | {"keys": keys, "max_completion": prov["ctx"] - 256}


def _client(live, key: str = "a") -> openai.OpenAI:
    return openai.OpenAI(
        base_url=live["url"] + "/v1", api_key=live["keys"][key], max_retries=0, timeout=120
    )


def _prompt(words: int = 60) -> str:
    tag = uuid.uuid4().hex[:8]
    return f"[{tag}] " + " ".join(f"The river {i} flows past the old mill." for i in range(words))


PARTS = ("prompt_cost", "cached_prompt_cost", "completion_cost", "request_cost")


def test_models_listing(live) -> None:
    # Default: OpenRouter's current provider format (schema 2.4).
    (m,) = httpx.get(live["url"] + "/v1/models").json()["data"]
    assert check_v24(m) == []
    assert m["id"] == MODEL_ID and m["quantization"] == "mxfp4"
    (text_in,) = m["input_modalities"]
    prices = {p["type"]: p["cost_usd"] for p in text_in["pricing"]}
    assert float(prices["prompt"]) == pytest.approx(PRICES["prompt"] / 1e6)
    assert float(prices["cached_prompt"]) == pytest.approx(PRICES["input_cache_read"] / 1e6)
    assert text_in["supported_inputs"]["max_context_length"]["value"] == live["ctx"]
    one = httpx.get(live["url"] + "/v1/models/" + MODEL_ID).json()
    assert one == m
    # The flat legacy format, for integrations made before 2.4.
    (flat,) = httpx.get(live["url"] + "/v1/models", params={"format": "legacy"}).json()["data"]
    assert check_legacy(flat) == []
    assert flat["quantization"] == "fp4" and flat["context_length"] == live["ctx"]
    assert float(flat["pricing"]["input_cache_read"]) == pytest.approx(
        PRICES["input_cache_read"] / 1e6
    )
    bad = httpx.get(live["url"] + "/v1/models", params={"format": "2.3"})
    assert bad.status_code == 400 and "format" in bad.json()["error"]["message"]


def test_chat_usage_cached_tokens_and_cost(live) -> None:
    client, prompt = _client(live), _prompt()
    msgs = [{"role": "user", "content": prompt}]
    first = client.chat.completions.create(model=MODEL_ID, messages=msgs, max_tokens=8)
    second = client.chat.completions.create(model=MODEL_ID, messages=msgs, max_tokens=8)
    assert first.model == MODEL_ID and first.choices[0].message.content is not None
    for resp in (first, second):
        u = resp.usage
        assert u.total_tokens == u.prompt_tokens + u.completion_tokens and u.completion_tokens > 0
        cached = u.prompt_tokens_details.cached_tokens
        assert u.cost == pytest.approx(
            expected_cost(u.prompt_tokens, u.completion_tokens, cached), rel=1e-9
        )
        raw = resp.usage.model_dump()
        assert check_usage(raw) == []
        assert raw["prompt_tokens_details"]["cache_write_tokens"] == u.prompt_tokens - cached
        assert sum(raw["cost_details"][k] for k in PARTS) == pytest.approx(u.cost, rel=1e-9)
        row = Ledger(live["db"]).get(resp.id)
        assert (row.status, row.prompt_tokens, row.completion_tokens, row.cached_tokens) == (
            "ok",
            u.prompt_tokens,
            u.completion_tokens,
            cached,
        )
        assert row.cost == pytest.approx(u.cost)
    # The repeat hits SGLang's radix cache and is billed cheaper for it.
    assert second.usage.prompt_tokens_details.cached_tokens > 0
    assert (
        first.usage.prompt_tokens_details.cached_tokens
        < second.usage.prompt_tokens_details.cached_tokens
    )


def test_stream_sends_usage_last_then_done(live) -> None:
    client = _client(live)
    chunks = list(
        client.chat.completions.create(
            model=MODEL_ID,
            messages=[{"role": "user", "content": _prompt(10)}],
            max_tokens=12,
            stream=True,
            extra_body={"ignore_eos": True},
        )
    )
    final = chunks[-1]
    assert final.choices == [] and final.usage.completion_tokens == 12
    assert final.usage.cost == pytest.approx(
        expected_cost(
            final.usage.prompt_tokens, 12, final.usage.prompt_tokens_details.cached_tokens
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks[:-1] if c.choices)
    assert text and all(c.model == MODEL_ID for c in chunks)
    # Raw SSE: the usage chunk is the last data event before [DONE].
    body = {"model": MODEL_ID, "prompt": _prompt(5), "max_tokens": 4, "stream": True}
    h = {"Authorization": f"Bearer {live['keys']['a']}"}
    with httpx.stream(
        "POST", live["url"] + "/v1/completions", json=body, headers=h, timeout=120
    ) as r:
        events = [line for line in r.iter_lines() if line.startswith("data:")]
    assert events[-1] == "data: [DONE]"
    last = json.loads(events[-2][5:])
    assert last["choices"] == [] and last["usage"]["completion_tokens"] >= 1
    assert check_usage(last["usage"]) == []


def test_completions_non_stream(live) -> None:
    resp = _client(live).completions.create(model=MODEL_ID, prompt=_prompt(5), max_tokens=5)
    assert resp.choices[0].text is not None and resp.usage.completion_tokens >= 1
    assert resp.usage.cost > 0


def _hostile_cases(live) -> list[tuple[str, str, dict, bytes | None, int, str]]:
    good = live["keys"]["a"]
    auth = {"Authorization": f"Bearer {good}", "Content-Type": "application/json"}
    chat, comp = "/v1/chat/completions", "/v1/completions"
    msg = [{"role": "user", "content": "hi"}]

    def j(**kw) -> bytes:
        return json.dumps({"model": MODEL_ID, "messages": msg, "max_tokens": 4, **kw}).encode()

    too_long = _prompt(live["ctx"] // 4 + 50)  # beyond context, found by the upstream tokenizer
    return [
        ("POST", chat, {}, j(), 401, "missing_key"),
        ("POST", chat, {"Authorization": "Bearer nonsense"}, j(), 401, "invalid_key"),
        ("POST", chat, {"Authorization": f"Basic {good}"}, j(), 401, "missing_key"),
        ("POST", chat, {"Authorization": f"Bearer {good[:-2]}xx"}, j(), 401, "invalid_key"),
        (
            "POST",
            chat,
            {"Authorization": f"Bearer {live['keys']['revoked']}"},
            j(),
            401,
            "revoked_key",
        ),
        ("POST", chat, auth, b"", 400, "invalid_json"),
        ("POST", chat, auth, b"{not json", 400, "invalid_json"),
        ("POST", chat, auth, b"[1, 2, 3]", 400, "invalid_json"),
        ("POST", chat, auth, b"[" * 100_000 + b"]" * 100_000, 400, "invalid_json"),
        ("POST", chat, auth, json.dumps({"messages": msg}).encode(), 400, "invalid_model"),
        ("POST", chat, auth, j(model=42), 400, "invalid_model"),
        ("POST", chat, auth, j(model="openai/gpt-9"), 400, "unknown_model"),
        ("POST", chat, auth, j(messages=[]), 400, "invalid_messages"),
        ("POST", chat, auth, j(messages="hi"), 400, "invalid_messages"),
        (
            "POST",
            chat,
            auth,
            j(messages=[{"role": "wizard", "content": "x"}]),
            400,
            "invalid_messages",
        ),
        ("POST", chat, auth, j(messages=[{"role": "user", "content": 7}]), 400, "invalid_messages"),
        (
            "POST",
            chat,
            auth,
            j(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}],
                    }
                ]
            ),
            400,
            "unsupported_modality",
        ),
        ("POST", chat, auth, j(max_tokens=0), 400, "invalid_parameter"),
        ("POST", chat, auth, j(max_tokens="10"), 400, "invalid_parameter"),
        ("POST", chat, auth, j(max_tokens=10**9), 400, "max_tokens_exceeded"),
        ("POST", chat, auth, j(temperature=5), 400, "invalid_parameter"),
        ("POST", chat, auth, j(temperature="hot"), 400, "invalid_parameter"),
        (
            "POST",
            chat,
            auth,
            b'{"model": "%s", "messages": [{"role": "user", "content": "x"}],'
            b' "temperature": NaN}' % MODEL_ID.encode(),
            400,
            "invalid_parameter",
        ),
        ("POST", chat, auth, j(top_p=True), 400, "invalid_parameter"),
        ("POST", chat, auth, j(n=3), 400, "invalid_parameter"),
        ("POST", chat, auth, j(stream="yes"), 400, "invalid_parameter"),
        ("POST", chat, auth, j(stop=["x"] * 20), 400, "invalid_parameter"),
        ("POST", chat, auth, j(logit_bias=[1, 2]), 400, "invalid_parameter"),
        (
            "POST",
            chat,
            auth,
            j(messages=[{"role": "user", "content": too_long}]),
            413,
            "context_length_exceeded",
        ),
        (
            "POST",
            chat,
            auth,
            j(messages=[{"role": "user", "content": "a" * (live["ctx"] * 65)}]),
            413,
            "context_length_exceeded",
        ),
        ("POST", chat, auth, b" " * (9 * 1024 * 1024), 413, "body_too_large"),
        ("POST", comp, auth, json.dumps({"model": MODEL_ID}).encode(), 400, "invalid_prompt"),
        (
            "POST",
            comp,
            auth,
            json.dumps({"model": MODEL_ID, "prompt": [-1, 5]}).encode(),
            400,
            "invalid_prompt",
        ),
        ("GET", chat, auth, None, 405, "method_not_allowed"),
        ("POST", "/v1/embeddings", auth, j(), 404, "not_found"),
    ]


def test_hostile_requests_table(live) -> None:
    cases = _hostile_cases(live)
    assert len(cases) >= 25
    with httpx.Client(base_url=live["url"], timeout=120) as http:
        for method, path, headers, body, status, reason in cases:
            r = http.request(method, path, headers=headers, content=body)
            label = (
                f"{method} {path} {body[:60] if body else body!r} -> {r.status_code} {r.text[:200]}"
            )
            assert r.status_code == status, label
            err = r.json()["error"]
            assert err["code"] == status and isinstance(err["message"], str) and err["message"]
            assert err["metadata"]["reason"] == reason, label
            assert "Traceback" not in r.text
        # Smuggled SGLang-internal fields are dropped, not obeyed.
        r = http.post(
            "/v1/chat/completions",
            headers=cases[6][2],
            json={
                "model": MODEL_ID,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2,
                "rid": "stolen",
                "cache_salt": "someone-else",
                "lora_path": "/etc/passwd",
            },
        )
        assert r.status_code == 200 and r.json()["id"] != "stolen"
        # Still healthy: /health generates a token upstream, and a normal request succeeds.
        assert http.get("/health").json() == {"status": "ok"}
    assert (
        _client(live)
        .chat.completions.create(
            model=MODEL_ID, messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        .usage
    )


def test_rate_limit_429_with_retry_after(live) -> None:
    client = _client(live, "limited")
    for _ in range(2):
        client.completions.create(model=MODEL_ID, prompt="hi", max_tokens=1)
    with pytest.raises(openai.RateLimitError) as info:
        client.completions.create(model=MODEL_ID, prompt="hi", max_tokens=1)
    resp = info.value.response
    assert resp.status_code == 429 and 1 <= int(resp.headers["retry-after"]) <= 60
    assert resp.json()["error"]["code"] == 429
    # Other keys are unaffected.
    assert _client(live, "b").completions.create(model=MODEL_ID, prompt="hi", max_tokens=1)


def test_spend_cap_402(live) -> None:
    """The cap (1e-7 USD) is below any request's worst case (its prompt bound plus max_tokens at
    the key's price), so the reservation refuses each before it reaches SGLang: a 402 naming
    the limit, and nothing billed (until 2026-12-06 the first request ran and overspent)."""
    client = _client(live, "capped")
    for prompt, max_tokens in ((_prompt(3), 2), ("hi", 1)):
        with pytest.raises(openai.APIStatusError) as info:
            client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=max_tokens)
        assert info.value.status_code == 402
        assert "limit" in str(info.value), info.value


def test_keys_hashed_at_rest(live) -> None:
    raw = b"".join(p.read_bytes() for p in live["db"].parent.glob(live["db"].name + "*"))
    for plain in live["keys"].values():
        assert plain.encode() not in raw and plain.split("-", 3)[3].encode() not in raw


def test_disconnect_mid_stream_aborts_upstream(live) -> None:
    max_tokens = live["max_completion"]  # minutes of decoding on this CPU if never aborted
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": _prompt(5)}],
            "max_tokens": max_tokens, "stream": True, "ignore_eos": True}  # fmt: skip
    h = {"Authorization": f"Bearer {live['keys']['a']}"}
    # After three chunks SGLang is decoding; it must stop long before max_tokens.
    row = abandon_stream(live, "/v1/chat/completions", body, h)
    assert row.status == "aborted" and 1 <= row.completion_tokens < max_tokens


def test_prefix_cache_isolated_per_key(live) -> None:
    prompt = _prompt()
    msgs = [{"role": "user", "content": prompt}]

    def cached(key: str) -> int:
        u = _client(live, key).chat.completions.create(model=MODEL_ID, messages=msgs, max_tokens=1)
        return u.usage.prompt_tokens_details.cached_tokens

    a_first, a_second = cached("a"), cached("a")
    b_first, b_second = cached("b"), cached("b")
    # Only the chat template's few leading tokens may be shared within a tenant's namespace.
    assert a_second > 4 * max(a_first, 1)  # tenant a warmed its own namespace
    assert b_first < a_second / 4  # ... which tenant b cannot see
    assert b_second > 4 * max(b_first, 1)


def test_metrics_exposed(live) -> None:
    text = httpx.get(live["url"] + "/metrics").text
    for name in (
        "provider_requests_total",
        "provider_prompt_tokens_total",
        "provider_completion_tokens_total",
        "provider_cached_tokens_total",
        "provider_cost_usd_total",
        "provider_ttft_seconds_bucket",
        "provider_inter_token_seconds_bucket",
        "provider_errors_total",
    ):
        assert name in text, name
    assert 'provider_errors_total{code="401"' in text


def test_ledger_survives_crash_mid_request(live, tmp_path: Path) -> None:
    db = tmp_path / "crash.sqlite"
    _, key = KeyStore(db).create("crash")
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": _prompt(5)}],
        "max_tokens": 400,
        "stream": True,
        "ignore_eos": True,
    }
    with provider_process(
        live["upstream"], live["pricing"], db, "--ledger-flush-tokens", "4"
    ) as prov:
        r0 = _client({"url": prov.url, "keys": {"k": key}}, "k").completions.create(
            model=MODEL_ID, prompt="hi", max_tokens=2
        )
        with httpx.stream(
            "POST",
            prov.url + "/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        ) as r:
            rid = r.headers["x-request-id"]
            seen = 0
            for line in r.iter_lines():
                seen += line.startswith("data:")
                if seen == 12:
                    # Kill while the stream is open: leaving the loop first closes the response,
                    # and a provider that sees that disconnect in time records "aborted".
                    prov.kill()
                    break
        assert Ledger(db).get(rid).status == "pending"
    with provider_process(live["upstream"], live["pricing"], db):
        rows = {row.id: row for row in Ledger(db).rows()}
    assert rows[r0.id].status == "ok" and len(rows) == 2  # earlier rows intact, none doubled
    row = rows[rid]
    # Billed for what was recorded before the crash (progress is written every 4 chunks).
    assert row.status == "recovered" and 4 <= row.completion_tokens < 400
    assert row.cost == pytest.approx(
        expected_cost(row.prompt_tokens, row.completion_tokens, row.cached_tokens)
    )
