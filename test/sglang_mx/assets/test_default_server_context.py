"""The default server (`sglang-mx serve`: the tiny GLM-5, Quark MXFP4) holds the context it
advertises: the config's `max_position_embeddings`, where perplexity holds (docs/tiny-model.md,
test_tiny_glm5_context.py). A longer prompt gets a clear 400 naming both numbers, a prompt that
fills the context gets text, and `sglang-mx bench` refuses a workload that cannot fit before it
sends anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx
import pytest
from sglang_mx.assets import bundled_model_path
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.bench.load.limits import fetch_limits
from sglang_mx_lab.testing.corpus import held_out_ids as corpus_ids

pytestmark = pytest.mark.server


def test_default_server_refuses_prompts_over_its_advertised_context(default_server, capsys):
    """The context the server advertises is the config's (docs/tiny-model.md: where perplexity
    holds); the issue's 3,000-token prompt gets a clear 400 naming both numbers, a prompt that
    fills the context gets text, and the bench refuses the 20k production preset in one line."""
    url = default_server
    ckpt = bundled_model_path("glm5-mxfp4")
    ctx = json.loads((Path(ckpt) / "config.json").read_text())["max_position_embeddings"]
    models = httpx.get(f"{url}/v1/models", timeout=30).json()["data"]
    assert models[0]["max_model_len"] == ctx
    assert httpx.get(f"{url}/get_model_info", timeout=30).json()["context_length"] == ctx
    assert fetch_limits(url).context_length == ctx

    from transformers import AutoTokenizer

    ids = corpus_ids(AutoTokenizer.from_pretrained(ckpt), 3000).tolist()
    body = {"model": models[0]["id"], "max_tokens": 16, "temperature": 0}
    r = httpx.post(f"{url}/v1/completions", json={**body, "prompt": ids}, timeout=120)
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    assert "The input (3000 tokens)" in message and f"context length ({ctx} tokens)" in message

    r = httpx.post(f"{url}/v1/completions", json={**body, "prompt": ids[: ctx - 16]}, timeout=300)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"].strip(), r.json()

    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(
        ["bench", "run", "--workload", "production-20k-1k-60", "--url", url, "--tokenizer", ckpt]
    )
    capsys.readouterr()
    assert args.func(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"context is {ctx} tokens" in err, err
