"""Upstream failure modes a real server cannot be made to produce on demand (HTTP 5xx, a
malformed event, a stream cut mid-way), driven through a scripted upstream."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from provider_fake_upstream import provider_on_fake
from provider_support import MODEL_ID, free_port, serve_in_thread
from sglang_mx.provider.app import build_app
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger
from sglang_mx.provider.settings import ProviderSettings


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with provider_on_fake(tmp_path_factory.mktemp("fake"), keepalive_s=0.2) as p:
        headers = {"Authorization": f"Bearer {p['key']}"}
        with httpx.Client(base_url=p["url"], headers=headers, timeout=30) as client:
            yield client, p["upstream"], p["db"]


def _chat(content: str, stream: bool = False, max_tokens: int = 5) -> dict:
    return {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


def _events(resp: httpx.Response) -> list[str]:
    return [line for line in resp.iter_lines() if line]


# DUPRID: SGLang's 400 for a request id it still holds. The id is the provider's own, fresh per
# request, so the duplicate is an earlier attempt of this request still upstream (a gateway's
# retry after a fault), never the client's doing: a 502, not the 400 of a bad request.
@pytest.mark.parametrize("trigger,status", [("HTTP500", 502), ("HTTP503", 503), ("DUPRID", 502)])
def test_upstream_http_errors_map_to_5xx(stack, trigger: str, status: int) -> None:
    client, _, db = stack
    for stream in (False, True):
        r = client.post("/v1/chat/completions", json=_chat(trigger, stream))
        assert r.status_code == status, r.text
        assert r.json()["error"]["code"] == status
        rid_rows = [row for row in Ledger(db).rows() if row.status == "error"]
        assert rid_rows and all(row.cost == 0 for row in rid_rows)


def test_midstream_cut_becomes_inband_error_and_bills_tokens_produced(stack) -> None:
    client, _, db = stack
    with client.stream("POST", "/v1/chat/completions", json=_chat("CUT", True, 6)) as r:
        assert r.status_code == 200
        events = _events(r)
    assert events[-1] == "data: [DONE]"
    err = json.loads(events[-2][len("data: ") :])
    assert err["error"]["code"] == 502 and err["choices"][0]["finish_reason"] == "error"
    content = [e for e in events[:-2] if e.startswith("data:")]
    assert len(content) == 2
    row = Ledger(db).get(err["id"])
    assert row.status == "error" and row.completion_tokens == 2 and row.cost > 0


def test_late_refusal_becomes_inband_error(stack) -> None:
    client, _, db = stack
    with client.stream("POST", "/v1/chat/completions", json=_chat("LATE503", True)) as r:
        assert r.status_code == 200  # the SSE reply had begun, with keep-alives
        raw = list(r.iter_lines())
    events = [line for line in raw if line]
    assert raw[:2] == ["", ""], raw[:4]  # blank keep-alives came before the refusal
    assert events[-1] == "data: [DONE]"
    err = json.loads(events[-2][len("data: ") :])
    assert err["error"]["code"] == 503
    assert Ledger(db).get(err["id"]).status == "error"


def test_malformed_upstream_event_becomes_inband_error(stack) -> None:
    client, _, _ = stack
    with client.stream("POST", "/v1/chat/completions", json=_chat("BADJSON", True, 6)) as r:
        events = _events(r)
    err = json.loads(events[-2][len("data: ") :])
    assert "malformed" in err["error"]["message"] and events[-1] == "data: [DONE]"


def test_many_events_in_one_read_with_crlf_are_all_relayed(stack) -> None:
    """The relay splits lines from raw reads: 40 events in one write, CRLF endings, UTF-8."""
    client, _, _ = stack
    with client.stream("POST", "/v1/chat/completions", json=_chat("ONEREAD", True, 40)) as r:
        assert r.status_code == 200
        events = _events(r)
    payloads = [json.loads(e[5:]) for e in events if e.startswith("data: {")]
    content = [p["choices"][0]["delta"]["content"] for p in payloads if p["choices"]]
    assert content == ["é"] * 40
    assert payloads[-1]["choices"] == [] and payloads[-1]["usage"]["completion_tokens"] == 40
    assert events[-1] == "data: [DONE]"


def test_keepalives_while_upstream_is_silent(stack) -> None:
    """The default keep-alive is an empty line pair: nothing but `data:` lines and blank lines."""
    client, _, _ = stack
    with client.stream("POST", "/v1/chat/completions", json=_chat("SLOW", True, 2)) as r:
        raw = r.read().decode()
    assert raw.startswith("\n\n"), raw[:40]  # a keep-alive before the first event
    assert all(line == "" or line.startswith("data: ") for line in raw.split("\n")), raw
    events = [line for line in raw.split("\n") if line]
    final = json.loads(events[-2][len("data: ") :])
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 2


def test_comment_keepalives_when_asked(tmp_path) -> None:
    """--keepalive-frame comment: OpenRouter's `: PROCESSING` comments instead."""
    with provider_on_fake(tmp_path, keepalive_s=0.2, keepalive_frame="comment") as p:
        headers = {"Authorization": f"Bearer {p['key']}"}
        body = _chat("SLOW", True, 2)
        with httpx.stream(
            "POST", p["url"] + "/v1/chat/completions", json=body, headers=headers, timeout=30
        ) as r:
            events = _events(r)
    first_data = next(i for i, e in enumerate(events) if e.startswith("data:"))
    assert ": PROCESSING" in events[:first_data]
    with pytest.raises(ValueError, match="keepalive_frame"):
        ProviderSettings(p["upstream"], p["pricing"], p["db"], keepalive_frame="ping")


def test_disconnect_calls_upstream_abort(stack) -> None:
    client, up, db = stack
    with client.stream("POST", "/v1/chat/completions", json=_chat("SLOW", True, 50)) as r:
        rid = r.headers["x-request-id"]
        for line in r.iter_lines():
            if line.startswith("data:"):
                break  # leave after the first token
    deadline = time.monotonic() + 10
    while rid not in httpx.get(up + "/aborted").json()["rids"]:
        assert time.monotonic() < deadline, "upstream abort was never requested"
        time.sleep(0.1)
    while Ledger(db).get(rid).status == "pending":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    row = Ledger(db).get(rid)
    assert row.status == "aborted" and 1 <= row.completion_tokens < 50


def test_upstream_down_is_502_and_health_503(tmp_path: Path, pricing_file: Path) -> None:
    db = tmp_path / "db.sqlite"
    _, key = KeyStore(db).create("t")
    dead = f"http://127.0.0.1:{free_port()}"
    with serve_in_thread(build_app(ProviderSettings(dead, pricing_file, db))) as url:
        h = {"Authorization": f"Bearer {key}"}
        for stream in (False, True):
            r = httpx.post(url + "/v1/chat/completions", json=_chat("x", stream), headers=h)
            assert r.status_code == 502
            assert r.json()["error"]["metadata"]["reason"] == "upstream_unavailable"
        r = httpx.get(url + "/health")
        assert r.status_code == 503 and r.json()["error"]["code"] == 503
