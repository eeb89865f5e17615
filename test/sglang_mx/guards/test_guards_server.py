"""Against a real SGLang server with the plugin: each request class that killed plain SGLang
0.5.23 (docs/reliability.md) gets a 400 naming the field and the limit, on /generate and the
OpenAI routes, and the server still generates afterwards."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.server

VOCAB = 2048  # the bundled tiny model's vocabulary


def _model(base: str) -> str:
    return httpx.get(base + "/v1/models", timeout=30).json()["data"][0]["id"]


def _gen(**kw):
    return {"sampling_params": {"max_new_tokens": 2}, **kw}


CASES = [
    ("/generate", _gen(input_ids=[1, 2, VOCAB]), "input_ids", f"[0, {VOCAB})"),
    ("/generate", _gen(input_ids=[1, -1]), "input_ids", "token id -1"),
    ("/generate", _gen(text="Hello", input_ids=[]), "input_ids", "must not be empty"),
    ("/generate", _gen(input_ids=[[1, 2], [3, 10**9]]), "input_ids", "token id 1000000000"),
    ("/generate", _gen(text="hi", return_logprob=True, top_logprobs_num=VOCAB + 1),
     "top_logprobs_num", f"[0, {VOCAB}]"),
    ("/generate", _gen(text="hi", sampling_params={"max_new_tokens": 2, "top_k": 2**31}),
     "sampling_params.top_k", "[1, 1073741824]"),
    ("/generate", _gen(text="hi", sampling_params={"max_new_tokens": 3, "min_new_tokens": 2,
                                                   "stop_token_ids": [99999]}),
     "sampling_params.stop_token_ids", f"[0, {VOCAB})"),
    ("/v1/completions", {"prompt": [1, 2, VOCAB], "max_tokens": 2}, "input_ids", f"[0, {VOCAB})"),
    ("/v1/completions", {"prompt": [[1, 2], [3, -7]], "max_tokens": 2}, "input_ids",
     "token id -7"),
    ("/v1/completions", {"prompt": "hi", "logprobs": 5000, "max_tokens": 2},
     "top_logprobs_num", f"[0, {VOCAB}]"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "logprobs": True,
                              "top_logprobs": 5000, "max_tokens": 2},
     "top_logprobs_num", f"[0, {VOCAB}]"),
]  # fmt: skip


@pytest.mark.parametrize(("route", "body", "field", "limit"), CASES)
def test_refused_and_server_lives(mxfp4_server, route, body, field, limit):
    if route.startswith("/v1/"):
        body = {"model": _model(mxfp4_server), **body}
    r = httpx.post(mxfp4_server + route, json=body, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()
    message = err["message"] if "message" in err else err["error"]["message"]
    assert f"`{field}`" in message and limit in message, message
    assert httpx.get(mxfp4_server + "/health_generate", timeout=60).status_code == 200


def test_model_info_reports_limits(mxfp4_server):
    info = httpx.get(mxfp4_server + "/get_model_info", timeout=30).json()
    assert info["vocab_size"] == VOCAB
    assert info["context_length"] == 8192


def test_in_vocabulary_ids_still_generate(mxfp4_server):
    r = httpx.post(
        mxfp4_server + "/generate",
        json=_gen(input_ids=[0, 5, VOCAB - 1], return_logprob=True, top_logprobs_num=VOCAB),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    top = r.json()["meta_info"]["output_top_logprobs"][0]
    assert len(top) == VOCAB
