"""Generated hostile requests against one real SGLang server with the plugin: a bounded run
(fixed seed) over /generate and the OpenAI routes, and a replay of every crasher `make fuzz`
has saved (test/sglang_mx/fuzz_regressions/*.json). No answer may be a 5xx or carry a
traceback, and after each request the server must still generate (/health_generate)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from sglang_mx.testing.campaign import for_each_hostile
from sglang_mx.testing.hostile import SGLANG_ROUTES, HostileRequest, Target, attack

pytestmark = pytest.mark.server

CAMPAIGN_SEED = 20261130
CAMPAIGN_CASES = int(os.environ.get("SGLANG_MX_CAMPAIGN_CASES", "250"))
REGRESSIONS = sorted((Path(__file__).parent / "fuzz_regressions").glob("*.json"))


def _target(base: str) -> Target:
    model = httpx.get(base + "/v1/models", timeout=30).json()["data"][0]["id"]
    info = httpx.get(base + "/get_model_info", timeout=30).json()
    return Target(model, info["vocab_size"], info["context_length"])


def test_bounded_campaign(mxfp4_server):
    target = _target(mxfp4_server)
    health = mxfp4_server
    with httpx.Client(timeout=60) as client:

        def one(req):
            out = attack(client, mxfp4_server, req, health)
            assert not out.failed, f"{out.failure}: {req} -> {out.status} {out.text[:300]}"

        for_each_hostile(SGLANG_ROUTES, target, CAMPAIGN_CASES, CAMPAIGN_SEED, one)


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_saved_crasher(mxfp4_server, path):
    case = json.loads(path.read_text())
    req = HostileRequest.from_json(case["request"])
    body = req.body.replace("{{model}}", _target(mxfp4_server).model)
    req = HostileRequest(req.route, body, req.content_type)
    with httpx.Client(timeout=60) as client:
        out = attack(client, mxfp4_server, req, mxfp4_server)
    assert not out.failed, f"{case['failure']} again: {out.failure} {out.status} {out.text[:300]}"
    if case.get("expect_status"):
        assert out.status == case["expect_status"], out.text[:300]
