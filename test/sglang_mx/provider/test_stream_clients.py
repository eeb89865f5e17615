"""The provider's streams as every kind of client reads them (issue 41). A slow scripted upstream
makes keep-alives fire before the first token and between tokens; each client must get every
token, the usage chunk and the end of the stream, whatever way it parses SSE:

- SGLang's own benchmark client (`sglang.benchmark.serving`, the real function): strips each
  line, skips empty ones, json-decodes the rest after `data: ` (a `: comment` fails it),
- the official `openai` SDK: a spec SSE parser,
- a line-at-a-time JSON client of the LLMPerf kind (the same habit as SGLang's, by hand),
- a client that splits the body on blank lines and keeps the `data:` events.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import httpx
import openai
import pytest
from provider_fake_upstream import provider_on_fake
from provider_support import MODEL_ID

TOKENS = 3  # the fake sends one "t" per token, 0.5 s apart: several 0.2 s keep-alives each


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    with provider_on_fake(tmp_path_factory.mktemp("clients"), keepalive_s=0.2) as p:
        yield p["url"], p["key"]


def _body() -> dict:
    return {"model": MODEL_ID, "messages": [{"role": "user", "content": "SLOW"}],
            "max_tokens": TOKENS, "stream": True}  # fmt: skip


def _sglang_bench_client(url: str, key: str, monkeypatch) -> tuple[str, int]:
    from sglang.benchmark import serving

    monkeypatch.setenv("OPENAI_API_KEY", key)
    serving.set_global_args(argparse.Namespace(disable_stream=False, disable_ignore_eos=False))
    req = serving.RequestFuncInput(
        prompt="SLOW", api_url=url + "/v1/chat/completions", prompt_len=1, output_len=TOKENS,
        model=MODEL_ID, lora_name="", image_data=None, extra_request_body={},
    )  # fmt: skip
    out = asyncio.run(serving.async_request_openai_chat_completions(req))
    assert out.success, out.error
    return out.generated_text, out.output_len


def _openai_sdk(url: str, key: str, monkeypatch) -> tuple[str, int]:
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=30)
    b = _body()
    text, usage = "", None
    for chunk in client.chat.completions.create(model=b["model"], messages=b["messages"],
                                                max_tokens=TOKENS, stream=True):  # fmt: skip
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage.completion_tokens
    return text, usage


def _line_json_client(url: str, key: str, monkeypatch) -> tuple[str, int]:
    text, usage = "", None
    with httpx.stream("POST", url + "/v1/chat/completions", json=_body(),
                      headers={"Authorization": f"Bearer {key}"}, timeout=30) as r:  # fmt: skip
        for line in r.iter_lines():
            line = line.strip()
            if not line:
                continue
            data = line.removeprefix("data: ")
            if data == "[DONE]":
                break
            event = json.loads(data)  # anything but a data line fails here, as in LLMPerf
            if event["choices"]:
                text += event["choices"][0]["delta"].get("content") or ""
            if event.get("usage"):
                usage = event["usage"]["completion_tokens"]
    return text, usage


def _blank_split_client(url: str, key: str, monkeypatch) -> tuple[str, int]:
    r = httpx.post(url + "/v1/chat/completions", json=_body(),
                   headers={"Authorization": f"Bearer {key}"}, timeout=30)  # fmt: skip
    text, usage = "", None
    for part in r.text.split("\n\n"):
        if not part.startswith("data: ") or part == "data: [DONE]":
            continue
        event = json.loads(part[len("data: ") :])
        if event["choices"]:
            text += event["choices"][0]["delta"].get("content") or ""
        if event.get("usage"):
            usage = event["usage"]["completion_tokens"]
    return text, usage


@pytest.mark.parametrize(
    "client", [_sglang_bench_client, _openai_sdk, _line_json_client, _blank_split_client],
    ids=["sglang-bench", "openai-sdk", "line-json", "blank-split"],
)  # fmt: skip
def test_every_client_reads_a_stream_with_keepalives(provider, client, monkeypatch) -> None:
    url, key = provider
    text, completion_tokens = client(url, key, monkeypatch)
    assert text == "t" * TOKENS
    assert completion_tokens == TOKENS
