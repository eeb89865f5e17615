"""SGLang's native routes through the provider, for `sgl.RuntimeEndpoint` programs: the three
agent programs with a key (same greedy output as against SGLang directly, every call billed,
cached tokens on forked branches), per-key cache namespaces, refused keys and admin routes in
OpenRouter's error shape, batches billed per output, streaming, cancellation, and a bounded
hostile campaign on /generate. Real processes: the session's SGLang server + one provider."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path

import httpx
import pytest
import sglang
from provider_support import (
    MODEL_ID,
    PRICES,
    abandon_stream,
    expected_cost,
    priced_provider,
    provider_process,
    write_pricing,
)
from sglang_mx.bench.agents.common import run_program, run_via_provider
from sglang_mx.bench.agents.multiturn_chat import chat
from sglang_mx.bench.agents.review_forkjoin import review
from sglang_mx.bench.agents.tool_agent import tool_agent
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger
from sglang_mx.provider.native import MAX_BATCH, validate_generate
from sglang_mx.provider.native_routes import ADMIN_ROUTES, is_admin
from sglang_mx.provider.pricing import model_from_dict
from sglang_mx_lab.testing.campaign import for_each_hostile
from sglang_mx_lab.testing.hostile import PROVIDER_NATIVE_ROUTES, Target, attack

# Small programs: the shared context still dominates every prompt (CPU time stays low).
PROGRAMS = {
    "tool_agent": (tool_agent, {"steps": 2}),
    "review_forkjoin": (review, {}),
    "multiturn_chat": (chat, {"turns": 3}),
}
SMALL = {"max_tokens": 2, "context_chars": 800}
VOCAB = 2048
CAMPAIGN_SEED = 20261130
CAMPAIGN_CASES = int(os.environ.get("SGLANG_MX_NATIVE_CAMPAIGN_CASES", "40"))


def _err(r: httpx.Response, status: int, reason: str) -> None:
    """OpenRouter's error shape: {"error": {"code", "message", "metadata": {"reason"}}}."""
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == status and isinstance(err["message"], str) and err["message"]
    assert err["metadata"]["reason"] == reason, err
    assert "Traceback" not in r.text


# --- without a server ---------------------------------------------------------------------


def test_every_sglang_admin_route_is_refused():
    """SGLang's own route table: each route it marks ADMIN is in the provider's 403 list, and
    the list names nothing SGLang does not serve."""
    src = (Path(sglang.__file__).parent / "srt/entrypoints/http_server.py").read_text()
    routes, admin = set(), set()
    for m in re.finditer(
        r"@app\.(?:get|post|put|api_route)\(\s*\"([^\"]+)\"(.*?)\n(?:async )?def", src, re.S
    ):
        routes.add(m.group(1))
        if "AuthLevel.ADMIN" in m.group(2):
            admin.add(m.group(1))
    assert len(admin) >= 30 and "/flush_cache" in admin
    missing = {r for r in admin if not is_admin(r)}
    assert not missing, f"admin routes of SGLang the provider would not refuse: {missing}"
    assert ADMIN_ROUTES <= routes, ADMIN_ROUTES - routes
    for served in ("/generate", "/get_model_info", "/v1/completions"):
        assert not is_admin(served)


def _model():
    return model_from_dict(
        {"id": MODEL_ID, "usd_per_m": PRICES, "context_length": 2048, "max_completion_tokens": 512},
        0,
    )


def test_validate_generate_rebuilds_the_body():
    m = _model()
    body = {
        "text": ["a", "b"],
        "sampling_params": {
            "max_new_tokens": 3,
            "n": 2,
            "stop": [],
            "regex": None,
            "temperature": 0,
            "stop_token_ids": [],
            "custom_params": {"x": 1},
        },
        "rid": "stolen",
        "cache_salt": "other",
        "lora_path": "/etc",
        "return_logprob": True,
        "logprob_start_len": 2,
    }
    req = validate_generate(body, {m.id: m}, m)
    assert req.outputs == 4 and req.batch and not req.stream
    up = req.upstream_body
    assert set(up) == {"text", "sampling_params", "return_logprob", "logprob_start_len", "stream"}
    assert up["sampling_params"] == {
        "max_new_tokens": 3,
        "n": 2,
        "stop": [],
        "temperature": 0,
        "stop_token_ids": [],
    }
    # SGLang's default length when none is given, capped by the model.
    assert validate_generate({"input_ids": [1, 2]}, {}, m).max_new_tokens == 128


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({}, 400, "invalid_prompt"),
        ({"text": "a", "input_ids": [1]}, 400, "invalid_prompt"),
        ({"text": ""}, 400, "invalid_prompt"),
        ({"input_ids": [[1], []]}, 400, "invalid_prompt"),
        ({"text": "a", "sampling_params": [{}]}, 400, "invalid_parameter"),
        ({"text": "a", "sampling_params": {"max_new_tokens": 10**6}}, 400, "max_tokens_exceeded"),
        ({"text": "a", "sampling_params": {"n": 0}}, 400, "invalid_parameter"),
        (
            {"text": ["a"] * (MAX_BATCH // 2 + 1), "sampling_params": {"n": 2}},
            400,
            "invalid_parameter",
        ),
        ({"text": "a", "sampling_params": {"temperature": "hot"}}, 400, "invalid_parameter"),
        ({"text": "a", "image_data": "http://x/y.png"}, 400, "unsupported_modality"),
        ({"text": "a", "model": "other/model"}, 400, "unknown_model"),
        ({"text": "a", "top_logprobs_num": 10**9}, 400, "invalid_parameter"),
        ({"text": "a", "stream": "yes"}, 400, "invalid_parameter"),
        ({"text": "a" * (2048 * 65)}, 413, "context_length_exceeded"),
    ],
)
def test_validate_generate_refuses(body, status, reason):
    from sglang_mx.provider.errors import ProviderError

    m = _model()
    with pytest.raises(ProviderError) as e:
        validate_generate(body, {m.id: m}, m)
    assert (e.value.status, e.value.reason) == (status, reason), e.value.message


# --- against the real server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def native(mxfp4_server: str, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("native")
    db = tmp / "provider.sqlite"
    store = KeyStore(db)
    keys = {
        name: store.create(name, **kw)[1]
        for name, kw in (("a", {}), ("b", {}), ("limited", {"rpm": 2}), ("revoked", {}))
    }
    store.revoke(store.lookup(keys["revoked"]).id)
    with priced_provider(mxfp4_server, tmp, db) as prov:
        yield prov | {"keys": keys}


def _flush(url: str) -> None:
    """SGLang's own cache flush (the operator's route; the provider refuses it)."""
    deadline = time.monotonic() + 30
    while httpx.post(url + "/flush_cache", timeout=30).status_code != 200:
        assert time.monotonic() < deadline, "SGLang would not flush"
        time.sleep(0.2)


def _h(native, key: str = "a") -> dict[str, str]:
    return {"Authorization": f"Bearer {native['keys'][key]}"}


def _check_billed(native, meter) -> None:
    ledger = Ledger(native["db"])
    for call in meter.calls:
        row = ledger.get(call.id)
        assert row is not None, call.id
        assert (row.status, row.key_id) == (
            "ok",
            KeyStore(native["db"]).lookup(native["keys"]["a"]).id,
        )
        assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens) == (
            call.prompt_tokens,
            call.completion_tokens,
            call.cached_tokens,
        )
        expected = expected_cost(call.prompt_tokens, call.completion_tokens, call.cached_tokens)
        assert row.cost == pytest.approx(expected, rel=1e-9) and call.cost == pytest.approx(
            expected, rel=1e-9
        )


@pytest.mark.server
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_agent_program_through_provider(native, name):
    func, extra = PROGRAMS[name]
    kwargs = {**SMALL, **extra}
    _flush(native["upstream"])
    direct, _ = run_program(func, native["upstream"], 1, True, flush=False, **kwargs)
    _flush(native["upstream"])
    res = run_via_provider(func, native["url"], native["keys"]["a"], 1, **kwargs)
    via = res["meter"]
    # Same greedy program output, call for call.
    assert via.texts == direct.texts
    assert len(via.calls) == len(direct.calls) >= 3
    assert sorted(c.output for c in via.calls) == sorted(c.output for c in direct.calls)
    # Every call billed once, as the ledger says; cached tokens at the cache-read price.
    _check_billed(native, via)
    assert res["cost_usd"] == pytest.approx(sum(c.cost for c in via.calls))
    assert res["cached_ratio"] > 0.5, res
    if name == "review_forkjoin":
        branches = [c for c in via.calls if "Review for" in c.prompt]
        assert len(branches) == 3
        assert all(c.cached_tokens > 0 for c in branches)


@pytest.mark.server
def test_bench_agents_cli_through_provider(native, tmp_path, capsys):
    from sglang_mx.cli.main import main

    out = tmp_path / "agents.json"
    argv = ["bench", "agents", "--url", native["url"], "--api-key", native["keys"]["a"],
            "--program", "review_forkjoin", "--sessions", "1", "--max-tokens", "2",
            "--context-chars", "800", "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert "| review_forkjoin | 1 |" in capsys.readouterr().out
    (row,) = json.loads(out.read_text())["programs"]
    assert row["calls"] == 5 and row["cached_ratio"] > 0.5
    ledger = [r for r in Ledger(native["db"]).rows() if r.created >= time.time() - 120]
    assert row["cost_usd_per_run"] == pytest.approx(sum(r.cost for r in ledger[-5:]), rel=1e-9)


@pytest.mark.server
def test_keys_do_not_share_cache(native):
    _flush(native["upstream"])
    a = run_via_provider(review, native["url"], native["keys"]["a"], 1, **SMALL)["meter"]
    b = run_via_provider(review, native["url"], native["keys"]["b"], 1, **SMALL)["meter"]
    assert a.texts == b.texts
    # Key b's first call is the prompt key a has just computed, yet nothing of it is cached...
    assert a.calls[0].prompt == b.calls[0].prompt and a.calls[0].cached_tokens == 0
    assert b.calls[0].cached_tokens == 0
    # ... while b's own forked branches share b's prefix, and key a still finds its own.
    assert all(c.cached_tokens > 0 for c in b.calls[1:])
    r = httpx.post(native["url"] + "/generate", headers=_h(native, "a"), timeout=120, json={
        "text": a.calls[0].prompt, "sampling_params": {"max_new_tokens": 0}})  # fmt: skip
    meta = r.json()["meta_info"]
    assert meta["cached_tokens"] >= meta["prompt_tokens"] - 1  # SGLang recomputes one token


@pytest.mark.server
def test_refusals_in_openrouter_shape(native):
    url = native["url"]
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 1}}
    with httpx.Client(base_url=url, timeout=60) as http:
        _err(http.post("/generate", json=body), 401, "missing_key")
        _err(http.post("/generate", json=body, headers=_h(native, "revoked")), 401, "revoked_key")
        _err(http.get("/get_model_info", headers=_h(native, "revoked")), 401, "revoked_key")
        for _ in range(2):
            assert http.post("/generate", json=body, headers=_h(native, "limited")).is_success
        r = http.post("/generate", json=body, headers=_h(native, "limited"))
        _err(r, 429, "rate_limited")
        assert 1 <= int(r.headers["retry-after"]) <= 60
        for path in (
            "/flush_cache",
            "/start_profile",
            "/stop_profile",
            "/server_info",
            "/update_weights_from_disk",
            "/abort_request",
            "/dumper/x",
        ):
            _err(http.post(path, json={}, headers=_h(native)), 403, "admin_route")
            _err(http.post(path, json={}), 401, "missing_key")
        _err(http.get("/flush_cache", headers=_h(native)), 403, "admin_route")
        _err(
            http.post("/concate_and_append_request", json={}, headers=_h(native)), 404, "not_found"
        )
    # What a program sees: RuntimeEndpoint raises with the provider's error body.
    from sglang.lang.backend.runtime_endpoint import RuntimeEndpoint

    ep = RuntimeEndpoint(url, api_key=native["keys"]["a"])
    assert ep.model_info["model_path"] == MODEL_ID
    upstream_path = httpx.get(native["upstream"] + "/get_model_info").json()["model_path"]
    assert upstream_path not in json.dumps(ep.model_info)  # no host paths shown
    with pytest.raises(RuntimeError) as e:
        ep.flush_cache()
    assert e.value.args[0]["error"]["code"] == 403
    with pytest.raises(RuntimeError) as e:
        RuntimeEndpoint(url, api_key=native["keys"]["revoked"])
    assert e.value.args[0]["error"]["code"] == 401


@pytest.mark.server
def test_batch_and_n_billed_per_output(native):
    tag = uuid.uuid4().hex[:8]
    prompts = [f"[{tag}] The river {i} flows past the old mill." for i in range(3)]
    r = httpx.post(
        native["url"] + "/generate",
        headers=_h(native),
        timeout=120,
        json={"text": prompts, "sampling_params": {"max_new_tokens": 3, "temperature": 0}},
    )
    assert r.status_code == 200, r.text
    outs = r.json()
    assert isinstance(outs, list) and len(outs) == 3
    ledger = Ledger(native["db"])
    for out in outs:
        meta = out["meta_info"]
        row = ledger.get(meta["id"])
        assert row.status == "ok" and row.prompt_tokens == meta["prompt_tokens"] > 0
        assert row.completion_tokens == meta["completion_tokens"] == 3
        assert meta["usage"]["cost"] == pytest.approx(row.cost)
        assert meta["id"].startswith(r.headers["x-request-id"] + "_")
    # n = 2: the prompt is prefilled (and billed) once, then each sample billed on its own row.
    r = httpx.post(
        native["url"] + "/generate",
        headers=_h(native),
        timeout=120,
        json={"text": prompts[0] + " again", "sampling_params": {"max_new_tokens": 2, "n": 2}},
    )
    assert r.status_code == 200, r.text
    rid = r.headers["x-request-id"]
    samples = r.json()
    assert len(samples) == 2
    prefill = ledger.get(f"{rid}-prefill")
    assert prefill.status == "ok" and prefill.completion_tokens == 0
    assert prefill.prompt_tokens - prefill.cached_tokens > 0  # the new suffix was written
    for s in samples:
        row = ledger.get(s["meta_info"]["id"])
        assert row.completion_tokens == 2 and row.cached_tokens > 0


@pytest.mark.server
def test_stream_relays_and_bills(native):
    body = {
        "text": f"[{uuid.uuid4().hex[:8]}] Once upon a time",
        "sampling_params": {"max_new_tokens": 6, "ignore_eos": True},
        "stream": True,
    }
    with httpx.stream(
        "POST", native["url"] + "/generate", json=body, headers=_h(native), timeout=120
    ) as r:
        assert r.status_code == 200
        events = [line[5:].strip() for line in r.iter_lines() if line.startswith("data:")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    last = chunks[-1]["meta_info"]
    assert last["finish_reason"] is not None and last["completion_tokens"] == 6
    assert all("usage" not in c["meta_info"] for c in chunks[:-1])
    row = Ledger(native["db"]).get(last["id"])
    assert row.status == "ok" and row.completion_tokens == 6
    assert last["usage"]["cost"] == pytest.approx(row.cost)
    assert chunks[-1]["text"].startswith(chunks[0]["text"])  # cumulative text, as SGLang sends
    # A DSL program streamed through the provider: same text and bill as unstreamed.
    from sglang.lang.backend.runtime_endpoint import RuntimeEndpoint

    # 64 tokens: under a loaded box SGLang's tokenizer manager hands on only the latest of the
    # outputs that arrived while it slept, and the DSL's text_iter yields whatever accumulated
    # since its thread last woke, so a short stream can arrive as one piece (CI, 2026-12-04: 16
    # tokens in one piece). The check is that a stream arrives in pieces, not that every token
    # is its own.
    @sglang.function
    def story(s, tag):
        s += f"[{tag}] Once upon a time" + sglang.gen("x", max_tokens=64, temperature=0)

    ep = RuntimeEndpoint(native["url"], api_key=native["keys"]["a"], chat_template_name="default")
    tag = uuid.uuid4().hex[:8]
    streamed = story.run(tag=tag, backend=ep, stream=True)
    pieces = list(streamed.text_iter())
    unary = story.run(tag=tag, backend=ep)
    assert len(pieces) > 1 and streamed.text() == unary.text()
    billed = [st.get_meta_info("x")["usage"] for st in (streamed, unary)]
    assert billed[0]["completion_tokens"] == billed[1]["completion_tokens"] > 0
    assert Ledger(native["db"]).get(streamed.get_meta_info("x")["id"]).status == "ok"


@pytest.mark.server
def test_disconnect_aborts_upstream(native):
    body = {
        "text": f"[{uuid.uuid4().hex[:8]}] Tell a long story.",
        "stream": True,
        "sampling_params": {"max_new_tokens": native["ctx"] - 300, "ignore_eos": True},
    }
    row = abandon_stream(native, "/generate", body, _h(native))
    assert row.status == "aborted" and 1 <= row.completion_tokens < native["ctx"] - 300


@pytest.mark.server
def test_hostile_generate_campaign(native, tmp_path):
    """Generated hostile /generate bodies through the provider: never a 5xx or a traceback,
    every answer within the client's 60 s, and the worker behind it still generates after each.
    This provider caps completions at 8 tokens: a drawn body that drops its length (e.g.
    `sampling_params: null`) is valid and would otherwise generate SGLang's default 128 tokens,
    over a minute on a loaded 2-core box, which would read as a hang."""
    served = httpx.get(native["upstream"] + "/v1/models", timeout=30).json()["data"][0]["id"]
    pricing = write_pricing(tmp_path / "p.json", served, native["ctx"], max_completion_tokens=8)
    db = tmp_path / "campaign.sqlite"
    key = KeyStore(db).create("campaign")[1]
    target = Target(MODEL_ID, VOCAB, native["ctx"])
    headers = {"Authorization": f"Bearer {key}"}
    with (
        provider_process(native["upstream"], pricing, db, "--default-rpm", "100000") as prov,
        httpx.Client(timeout=60) as client,
    ):

        def one(req):
            out = attack(client, prov.url, req, native["upstream"], headers)
            assert not out.failed, f"{out.failure}: {req} -> {out.status} {out.text[:300]}"
            if out.status != 200:
                assert "error" in json.loads(out.text), out.text[:300]

        for_each_hostile(PROVIDER_NATIVE_ROUTES, target, CAMPAIGN_CASES, CAMPAIGN_SEED, one)
