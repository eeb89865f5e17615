"""Calibration pieces without a model: the null server streams max_tokens tokens and sends its
usage event (choices: []) only to a client that asks for it, as OpenAI and SGLang do, so SGLang's
own benchmark client (which reads every event's choices[0] and asks for no usage) can be
calibrated against it too; a side-by-side calibration's ceilings and table (calibrate_peer)."""

from __future__ import annotations

import json

import httpx
import pytest
from bench_processes import null_upstream
from sglang_mx.bench.run.calibrate_peer import ceiling, table


@pytest.fixture(scope="module")
def null_url():
    with null_upstream("--stream-max-tokens") as url:
        yield url


def _events(url: str, **extra) -> list[dict]:
    body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 5, "stream": True, **extra}
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=10) as resp:
        data = [x[5:].strip() for x in resp.iter_lines() if x.startswith("data:")]
    assert data[-1] == "[DONE]"
    return [json.loads(x) for x in data[:-1]]


def test_null_server_sends_usage_only_when_asked(null_url):
    plain = _events(null_url)
    assert len(plain) == 5 and all(e["choices"][0]["text"] for e in plain)  # SGLang's client
    asked = _events(null_url, stream_options={"include_usage": True})
    assert [e["choices"] for e in asked[:5]] == [plain[0]["choices"]] * 5
    assert asked[5]["choices"] == [] and asked[5]["usage"]["completion_tokens"] == 5
    assert asked[5]["usage"]["prompt_tokens"] == 3


def _step(rate: float, req_s: float, passed: bool) -> dict:
    return {"target_req_s": rate, "req_s": req_s, "tok_s": 32 * req_s, "passed": passed,
            "lag_p50_s": 0.0005, "lag_p99_s": 0.004, "client_cpu": 0.2}  # fmt: skip


def test_ceiling_is_the_last_pass_before_the_first_failure():
    steps = [_step(25, 25.1, True), _step(50, 49.8, True), _step(100, 71.0, False),
             _step(200, 199.0, True)]  # fmt: skip
    assert ceiling(steps) == {"req_s": 49.8, "tok_s": 32 * 49.8}  # a later lucky pass is no ceiling
    assert ceiling([_step(25, 10.0, False)]) is None
    text = table({"steps": steps, "sglang_steps": steps})
    assert "| 100 | 71.0 (x) | 2,272 | 0.50 / 4.0 | 20% | 71.0 (x) | 2,272 |" in text


def test_sglang_step_sends_every_request_it_counts(null_url, bundled_tokenizer_dir, tmp_path):
    """SGLang's client sends at most one request per prompt-file row: a step of 400 requests
    must get 400 rows (a 64-row file once failed every step with 336 'errors')."""
    from sglang_mx.bench.run.calibrate_peer import MIN_REQUESTS, sglang_step

    step = sglang_step(null_url, bundled_tokenizer_dir, 200.0, 4, tmp_path, 1.0)
    assert step["requests"] == MIN_REQUESTS and step["errors"] == 0, step
    assert step["req_s"] > 0
