"""MXFP4 checkpoints of the GLM-5-architecture tiny model (GlmMoeDsaForCausalLM: MLA + DSA
indexer + MoE) served by a real SGLang server through our plugin (mx_dsa attention, MXFP4 MoE
method, MXFP4 linear method) stay close to the bf16 model:

- the AMD Quark full layout written at test time by `sglang-mx quantize --format quark` (routed
  experts, shared experts and layer 0's dense MLP in MXFP4 W4A4; attention, indexer, router gate
  and lm_head excluded);
- the shipped `tiny-glm5-quark` (Quark's file2file layout as amd/GLM-5.2-MXFP4 ships: routed and
  shared experts MXFP4, exact-name excludes, MTP layer bf16; W4A16), i.e. what `sglang-mx serve`
  serves by default.

One server at a time (module-scoped, parametrized); each is compared with the bf16 model's
float32 transformers forward on the same held-out sample as the GLM-4.5 test
(test_quark_checkpoint.py), teacher-forced: every position's full next-token distribution.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx
import pytest
import torch
from sglang_mx.assets import bundled_model_path
from sglang_mx.bench import cli as bench_cli
from sglang_mx.bench.limits import fetch_limits
from sglang_mx.cli.main import main
from sglang_mx.testing.corpus import held_out_ids as corpus_ids
from sglang_mx.testing.hf_reference import load_hf
from sglang_mx.testing.served_distribution import (
    check_mxfp4_log,
    held_out_prompt_ids,
    reference_logprobs,
    served_kl_top1,
)
from sglang_mx.testing.server import start_server

pytestmark = pytest.mark.server

VOCAB = 2048
# (checkpoint, activation mode, MXFP4 linears: layer 0's dense MLP + 3 MoE layers' shared
# experts, x2 for gate_up and down; the shipped Quark checkpoint excludes the dense MLP,
# bound on mean KL in nats, bound on top-1 agreement).
# Measured 2026-11-30 on the 2-core CPU box (SGLang 0.5.23, served in bf16, 167 positions):
#   quark-full W4A4     mean KL 0.090, top-1 0.832
#   shipped-mxfp4 W4A16 mean KL 0.027, top-1 0.928 (sglang_mx format, the default until 2026-12-01)
#   shipped-quark W4A16 mean KL 0.030, top-1 0.928 (2026-12-01: Quark layout, shared experts too)
#   served tiny-glm5-bf16 (no quantization; bf16 activations, FP8 index keys) 0.002, 0.988
# Bounds: ~3x the measured KL and ~2x the measured disagreement, room for bf16 drift and a
# retrained model. What they must catch: the routed_scaling_factor 2.5 dropped (routed-expert
# output 2.5x too small, transformers on the same sample) gives KL 0.56, top-1 0.67; applied
# twice 1.04, 0.52; a wrong nibble order or scale costs whole nats.
CHECKPOINTS = [
    ("quark-full", "W4A4", 8, 0.25, 0.70),
    ("shipped-quark", "W4A16", 6, 0.08, 0.85),
]


@pytest.fixture(scope="module")
def held_out_ids():
    return held_out_prompt_ids(bundled_model_path("glm5-bf16"))


@pytest.fixture(scope="module")
def bf16_logprobs(held_out_ids):
    """log p(next | prefix) of the bf16 model in float32 (transformers), [T-1, V]."""
    model = load_hf(bundled_model_path("glm5-bf16"), torch.float32)
    # Past index_topk keys the indexer's selections enter the comparison too (FP8 index keys
    # when served): the sample reaches into the sparse regime.
    assert len(held_out_ids) > model.config.index_topk
    return reference_logprobs(model, held_out_ids)


@pytest.fixture(scope="module", params=CHECKPOINTS, ids=[c[0] for c in CHECKPOINTS])
def mxfp4_server(request, tmp_path_factory):
    name, mode, linears, max_kl, min_top1 = request.param
    if name == "shipped-quark":  # what `sglang-mx serve` serves: the session's server for it
        handle = request.getfixturevalue("default_server_handle")
        yield handle, name, mode, linears, max_kl, min_top1
        return
    ckpt = str(tmp_path_factory.mktemp("glm5-quark") / name)
    args = ["quantize", bundled_model_path("glm5-bf16"), ckpt, "--format", "quark"]
    assert main([*args, "--quark-layout", "full", "--act-quant", "mxfp4"]) == 0
    handle = start_server(ckpt)
    try:
        yield handle, name, mode, linears, max_kl, min_top1
    finally:
        handle.stop()


def test_glm5_mxfp4_served_close_to_bf16(mxfp4_server, held_out_ids, bf16_logprobs):
    handle, name, mode, linears, max_kl, min_top1 = mxfp4_server
    log = handle.log_path.read_text(errors="replace")
    assert "'attention_backend': 'mx_dsa'" in log
    check_mxfp4_log(log, mode, linears)

    kl, top1 = served_kl_top1(handle.base_url, held_out_ids, bf16_logprobs, VOCAB)
    assert kl < max_kl, (name, kl, top1)
    assert top1 > min_top1, (name, kl, top1)


def test_glm5_server_refuses_prompts_over_its_advertised_context(mxfp4_server, capsys):
    """The context the server advertises is the config's (docs/tiny-model.md: where perplexity
    holds); the issue's 3,000-token prompt gets a clear 400 naming both numbers, a prompt that
    fills the context gets text, and the bench refuses the 20k production preset in one line."""
    handle = mxfp4_server[0]
    url = handle.base_url
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
        ["bench", "run", "--preset", "production-20k-1k-60", "--url", url, "--tokenizer", ckpt]
    )
    capsys.readouterr()
    assert args.func(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"context is {ctx} tokens" in err, err
