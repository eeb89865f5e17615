"""A real SGLang 0.5.23 server on the bundled MXFP4 model, with the sglang_mx plugin active."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def client(mxfp4_server):
    return openai.OpenAI(base_url=f"{mxfp4_server}/v1", api_key="unused", timeout=120)


def test_health_and_models(mxfp4_server, client):
    assert httpx.get(f"{mxfp4_server}/health", timeout=30).status_code == 200
    models = client.models.list()
    assert len(models.data) == 1
    assert models.data[0].id.endswith("tiny-glm-moe-mxfp4")


def test_server_uses_our_platform_and_mxfp4_method(mxfp4_server, mxfp4_server_handle):
    info = httpx.get(f"{mxfp4_server}/get_server_info", timeout=30).json()
    assert info["attention_backend"] == "torch_native"
    assert info["device"] == "cpu"
    log = mxfp4_server_handle.log_path.read_text(errors="replace")
    # one line per MoE layer (3 in the bundled model), from MxFp4MoEMethod.create_weights
    assert log.count("sglang_mx: MXFP4 experts") == 3, mxfp4_server_handle.log_tail()
    assert info["sleep_on_idle"] is True  # the CPU platform's default (platform_impl.py)


def test_idle_scheduler_does_not_spin(mxfp4_server, mxfp4_server_handle):
    """SGLang's scheduler busy-polls its sockets unless --sleep-on-idle; the CPU platform turns
    that on, so an idle server leaves the cores to everything else on the box."""
    import time

    import psutil

    server = psutil.Process(mxfp4_server_handle.proc.pid)
    schedulers = [p for p in server.children(recursive=True) if "scheduler" in p.name()]
    assert len(schedulers) == 1, [p.name() for p in server.children(recursive=True)]
    sched = schedulers[0]
    time.sleep(0.5)  # let the last request of an earlier test finish
    before = sum(sched.cpu_times()[:2])
    time.sleep(2.0)
    used = sum(sched.cpu_times()[:2]) - before
    assert used < 0.5, f"idle scheduler used {used:.2f} CPU-s in 2 s: it is spinning"


def test_generate_native(mxfp4_server):
    r = httpx.post(
        f"{mxfp4_server}/generate",
        json={
            "text": "import os\nimport ",
            "sampling_params": {"max_new_tokens": 8, "temperature": 0},
        },
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta_info"]["completion_tokens"] == 8
    assert len(body["output_ids"]) == 8
    assert isinstance(body["text"], str) and body["text"]


def test_chat_completion(client):
    resp = client.chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "def add(a, b):"}],
        max_tokens=12,
        temperature=0,
    )
    choice = resp.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert resp.usage.completion_tokens == 12
    assert resp.usage.prompt_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens


def test_chat_completion_stream_matches_non_stream(client):
    kwargs = dict(
        model="default",
        messages=[{"role": "user", "content": "class Parser:"}],
        max_tokens=10,
        temperature=0,
    )
    full = client.chat.completions.create(**kwargs).choices[0].message.content
    pieces = []
    usage = None
    for chunk in client.chat.completions.create(
        **kwargs, stream=True, stream_options={"include_usage": True}
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            usage = chunk.usage
    assert len(pieces) > 1
    assert "".join(pieces) == full
    assert usage is not None and usage.completion_tokens == 10


def test_repeated_long_prompt_reports_cached_tokens(client):
    long_prompt = "".join(f"def function_{i}(x):\n    return x + {i}\n\n" for i in range(40))
    kwargs = dict(
        model="default",
        messages=[{"role": "user", "content": long_prompt}],
        max_tokens=2,
        temperature=0,
    )
    first = client.chat.completions.create(**kwargs)
    second = client.chat.completions.create(**kwargs)
    assert first.usage.prompt_tokens > 200
    cached = second.usage.prompt_tokens_details.cached_tokens
    # The radix cache keeps the first request's prompt: all but the last token can be reused.
    assert cached >= first.usage.prompt_tokens - 16, (cached, first.usage.prompt_tokens)


def test_worker_start_lines_are_ones_sglang_prints(mxfp4_server_handle):
    """The lines test_checkpoint_load's truncated-checkpoint test looks for are in the installed
    SGLang's source and in a healthy server's log: a renamed line would make that check hollow."""
    import sglang
    from sglang_mx_lab.testing.server import WORKER_START_LINES

    src = Path(sglang.__file__).parent / "srt"
    files = {"distributed/bootstrap.py", "model_executor/model_runner.py"}
    text = "".join((src / f).read_text() for f in files)
    log = mxfp4_server_handle.log_path.read_text(errors="replace")
    for line in WORKER_START_LINES:
        assert line in text, f"{line!r} is not in SGLang {sglang.__version__}'s {sorted(files)}"
        assert line in log, f"a healthy server never printed {line!r}"
