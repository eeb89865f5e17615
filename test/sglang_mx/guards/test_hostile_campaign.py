"""Generated hostile requests against real SGLang servers with the plugin: a bounded run (fixed
seed, a time budget) over /generate and the OpenAI routes, and a replay of every crasher `make
fuzz` has saved (test/sglang_mx/guards/fuzz_regressions/*.json), each against both session servers:

- the GLM-4.5 tiny MXFP4 model (GQA attention, torch_native);
- the default model, what `sglang-mx serve` serves (tiny GLM-5 MXFP4: mx_dsa attention, MLA +
  DSA indexer, page 64, chunked prefill);
- the same with MTP (`sglang-mx serve --mtp`: SGLang's EAGLE over its NextN layer).

No answer may be a 5xx or carry a traceback, and after each request the server must still
generate exactly one token for a 1-token request (sglang_mx_lab.testing.liveness). That the
detection itself can fail is tested against planted faults in test_campaign_faults.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from sglang_mx_lab.testing.campaign import assert_no_hostile_request_fails
from sglang_mx_lab.testing.hostile import HostileRequest, Target, attack

pytestmark = [pytest.mark.server, pytest.mark.session_servers]

CAMPAIGN_SEED = 20261130
# Seconds of generated requests per server, the same for each; the seed is fixed, so a budget
# only cuts the same sequence shorter on a slower machine. At least MIN_CASES however slow.
CAMPAIGN_S = float(os.environ.get("SGLANG_MX_CAMPAIGN_S", "20"))
MIN_CASES = 20
MAX_CASES = 100_000
# name -> (session fixture, the attention backend and page size its requests must reach)
SERVERS = {
    "glm45-mxfp4": ("mxfp4_server", "torch_native", 1),
    "glm5-default": ("default_server", "mx_dsa", 64),
    "glm5-mtp": ("mtp_server", "mx_dsa", 64),  # EAGLE: target verify + draft extend
}
REGRESSIONS = sorted((Path(__file__).parent / "fuzz_regressions").glob("*.json"))


def _target(base: str) -> Target:
    served = httpx.get(base + "/v1/models", timeout=30).json()["data"][0]
    info = httpx.get(base + "/get_model_info", timeout=30).json()
    if "vocab_size" in info:  # our plugin's guards add the limits to /get_model_info
        return Target(served["id"], info["vocab_size"], info["context_length"])
    # Plain SGLang (SGLANG_MX_GUARDS=0): the model's config and /v1/models say them.
    config = json.loads((Path(info["model_path"]) / "config.json").read_text())
    return Target(served["id"], config["vocab_size"], served["max_model_len"])


@pytest.fixture(params=sorted(SERVERS))
def server(request) -> str:
    return request.getfixturevalue(SERVERS[request.param][0])


@pytest.fixture
def attention(request, server) -> tuple[str, int]:
    return SERVERS[request.node.callspec.params["server"]][1:]


def test_bounded_campaign(server, attention):
    info = httpx.get(server + "/get_server_info", timeout=30).json()
    assert (info["attention_backend"], info["page_size"]) == attention
    target = _target(server)
    sent, took = assert_no_hostile_request_fails(
        server, target, MAX_CASES, CAMPAIGN_SEED, CAMPAIGN_S, MIN_CASES
    )
    print(f"{sent} hostile requests in {took:.0f} s against {target.model}")
    assert sent >= MIN_CASES


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_saved_crasher(server, path):
    case = json.loads(path.read_text())
    req = HostileRequest.from_json(case["request"])
    body = req.body.replace("{{model}}", _target(server).model)
    req = HostileRequest(req.route, body, req.content_type)
    with httpx.Client(timeout=60) as client:
        out = attack(client, server, req, server)
    assert not out.failed, f"{case['failure']} again: {out.failure} {out.status} {out.text[:300]}"
    if case.get("expect_status"):
        assert out.status == case["expect_status"], out.text[:300]
