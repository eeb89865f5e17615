"""The provider's own guard: limits learned from the upstream, token-id prompts and logit_bias
keys outside the vocabulary refused by the provider itself (reason `invalid_parameter`, not the
upstream's `upstream_rejected`), before anything reaches a worker; plus a bounded generated
hostile-request campaign through the provider against each of the session's real servers (the
GLM-4.5 tiny model, and the default GLM-5 one `sglang-mx serve` serves)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import httpx
import pytest
from provider_support import MODEL_ID, provider_process, write_pricing
from sglang_mx.provider.guards import Limits, limits_from
from sglang_mx.provider.keys import KeyStore
from sglang_mx_lab.testing.campaign import for_each_hostile
from sglang_mx_lab.testing.hostile import PROVIDER_ROUTES, Target, attack

VOCAB = 2048
CAMPAIGN_SEED = 20261130
# Seconds of generated requests per upstream model, the same for each (fixed seed: a budget only
# cuts the same sequence shorter), and at least MIN_CASES however slow.
CAMPAIGN_S = float(os.environ.get("SGLANG_MX_PROVIDER_CAMPAIGN_S", "20"))
MIN_CASES = 10
CAMPAIGN_UPSTREAMS = {"glm45-mxfp4": "mxfp4_server", "glm5-default": "default_server"}


def test_limits_from_plugin_model_info():
    info = {"model_path": "x", "vocab_size": 151552, "context_length": 202752}
    models = {"data": [{"id": "x", "max_model_len": 4096}]}
    assert limits_from(info, models) == Limits(151552, 202752)


def test_limits_from_plain_sglang(tmp_path):
    # No plugin: context from /v1/models, vocabulary from the model's local config.json.
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 321}))
    info = {"model_path": str(tmp_path)}
    models = {"data": [{"id": "x", "max_model_len": 4096}, {"id": "y", "max_model_len": 1024}]}
    assert limits_from(info, models) == Limits(321, 1024)


def test_limits_unknown_when_upstream_says_nothing():
    assert limits_from({"model_path": "org/remote-model"}, None) == Limits(None, None)
    assert limits_from(None, {"data": "nonsense"}) == Limits(None, None)


@contextmanager
def _provider_before(upstream: str, tmp: Path) -> Iterator[dict]:
    served = httpx.get(upstream + "/v1/models", timeout=30).json()["data"][0]
    pricing = write_pricing(
        tmp / "pricing.json", served["id"], context_length=8192, max_completion_tokens=8000
    )
    db = tmp / "provider.sqlite"
    _, key = KeyStore(db).create("guards")
    with provider_process(upstream, pricing, db, "--default-rpm", "100000") as p:
        yield {"url": p.url, "key": key, "upstream": upstream}


@pytest.fixture(scope="module")
def prov(mxfp4_server: str, tmp_path_factory):
    with _provider_before(mxfp4_server, tmp_path_factory.mktemp("guards")) as p:
        yield p


def _post(prov, route: str, body: dict) -> httpx.Response:
    return httpx.post(
        prov["url"] + route,
        json={"model": MODEL_ID, **body},
        headers={"Authorization": f"Bearer {prov['key']}"},
        timeout=60,
    )


REFUSED = [
    ({"prompt": [1, 2, VOCAB], "max_tokens": 2}, 400, "`prompt`", f"[0, {VOCAB})"),
    ({"prompt": [1, 10**12], "max_tokens": 2}, 400, "`prompt`", "token id 1000000000000"),
    ({"prompt": "hi", "logit_bias": {"5000": 1}, "max_tokens": 2}, 400, "`logit_bias`", "5000"),
    ({"prompt": "hi", "logit_bias": {"-3": 1}, "max_tokens": 2}, 400, "`logit_bias`", "-3"),
    ({"prompt": [1] * 8000, "max_tokens": 500}, 413, "exceeds", "8192-token context"),
]


@pytest.mark.server
@pytest.mark.parametrize(("body", "status", "field", "limit"), REFUSED)
def test_provider_refuses_itself(prov, body, status, field, limit):
    r = _post(prov, "/v1/completions", body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert field in err["message"] and limit in err["message"], err
    assert err["metadata"]["reason"] in ("invalid_parameter", "context_length_exceeded"), err
    assert httpx.get(prov["upstream"] + "/health_generate", timeout=60).status_code == 200


@pytest.mark.server
def test_in_vocabulary_token_prompt_served(prov):
    r = _post(prov, "/v1/completions", {"prompt": [0, 7, VOCAB - 1], "max_tokens": 2})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == 3


@pytest.mark.server
@pytest.mark.session_servers
@pytest.mark.parametrize("upstream", sorted(CAMPAIGN_UPSTREAMS))
def test_provider_campaign_bounded(request, upstream, tmp_path):
    """Generated hostile requests through the provider: never a 5xx or traceback, and the
    worker behind it still generates (exactly one token for a 1-token request) after each."""
    if upstream == "glm45-mxfp4":
        prov = request.getfixturevalue("prov")
        ctx = nullcontext(prov)
    else:
        ctx = _provider_before(request.getfixturevalue(CAMPAIGN_UPSTREAMS[upstream]), tmp_path)
    with ctx as prov:
        info = httpx.get(prov["upstream"] + "/get_model_info", timeout=30).json()
        # The context the provider enforces: its pricing's, or the upstream's if smaller.
        target = Target(MODEL_ID, info["vocab_size"], min(8192, info["context_length"]))
        headers = {"Authorization": f"Bearer {prov['key']}"}
        health = prov["upstream"]
        with httpx.Client(timeout=60) as client:

            def one(req):
                out = attack(client, prov["url"], req, health, headers)
                assert not out.failed, f"{out.failure}: {req} -> {out.status} {out.text[:300]}"

            t0 = time.monotonic()
            sent = for_each_hostile(
                PROVIDER_ROUTES, target, 100_000, CAMPAIGN_SEED, one, CAMPAIGN_S, MIN_CASES
            )
    took = time.monotonic() - t0
    print(f"{sent} hostile requests in {took:.0f} s through the provider to {upstream}")
    assert sent >= MIN_CASES


def test_guard_learns_refreshes_and_keeps_limits_when_upstream_goes_down():
    """Against an in-process upstream that answers like our plugin, then changes, then dies."""
    import asyncio

    from fastapi import FastAPI
    from provider_support import serve_in_thread
    from sglang_mx.provider.errors import ProviderError
    from sglang_mx.provider.guards import UpstreamGuard
    from sglang_mx.provider.upstream import Upstream

    app = FastAPI()
    app.state.vocab = 100

    @app.get("/get_model_info")
    async def info() -> dict:
        return {"model_path": "remote/model", "vocab_size": app.state.vocab}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"data": [{"id": "m", "max_model_len": 512}]}

    async def scenario(url: str) -> None:
        upstream = Upstream(url, 1.0, 5.0)
        guard = UpstreamGuard(upstream)
        assert await guard.refresh() == Limits(100, 512)
        guard.check({"prompt": [0, 99], "max_tokens": 4})
        with pytest.raises(ProviderError) as e:
            guard.check({"prompt": [0, 100], "max_tokens": 4})
        assert e.value.status == 400 and "[0, 100)" in e.value.message
        with pytest.raises(ProviderError) as e:
            guard.check({"prompt": [1] * 510, "max_tokens": 4})
        assert e.value.status == 413
        app.state.vocab = 200  # e.g. a new model behind the same URL
        assert await guard.refresh() == Limits(200, 512)
        guard.check({"prompt": [150], "max_tokens": 4})
        await upstream.close()

    with serve_in_thread(app) as url:
        asyncio.run(scenario(url))

    async def down() -> None:
        guard = UpstreamGuard(Upstream(url, 0.5, 1.0))
        guard.limits = Limits(200, 512)
        assert await guard.refresh() == Limits(200, 512)  # nothing answered: kept

    asyncio.run(down())
