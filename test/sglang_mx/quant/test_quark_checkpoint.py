"""AMD Quark MXFP4 checkpoints served by a real SGLang server through our plugin (MoE method for
routed experts, MXFP4 linear method for dense MLPs and shared experts) stay close to the bf16
model they came from, on both tiny architectures:

- GLM-4.5 (GQA): both layouts `sglang-mx quantize --format quark` writes at test time (full W4A4
  with the dense MLP and shared experts MXFP4; experts-only W4A16);
- GLM-5 (GlmMoeDsaForCausalLM: MLA + DSA indexer, served by mx_dsa): the full layout written at
  test time (W4A4), and the shipped `tiny-glm5-quark` (Quark's file2file layout as
  amd/GLM-5.2-MXFP4 ships: routed and shared experts MXFP4, exact-name excludes, MTP layer bf16;
  W4A16), i.e. what `sglang-mx serve` serves by default: the session's default server.

The written checkpoints' servers start side by side and serve the module. Each server is
compared with its bf16 model's float32 transformers forward on the same held-out sample,
teacher-forced: every position's full next-token distribution (mean KL, top-1 agreement).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pytest
import torch
from sglang_mx.assets import bundled_model_path
from sglang_mx.cli.main import main
from sglang_mx_lab.testing.hf_reference import load_hf
from sglang_mx_lab.testing.served_distribution import (
    check_mxfp4_log,
    held_out_prompt_ids,
    reference_logprobs,
    served_kl_top1,
)
from sglang_mx_lab.testing.server import start_servers

pytestmark = [pytest.mark.server, pytest.mark.session_servers]

VOCAB = 2048


@dataclass(frozen=True)
class Checkpoint:
    name: str
    bf16: str  # the bundled bf16 model it is quantized from / compared with
    layout: str | None  # `--quark-layout` written at test time; None: the shipped default model
    mode: str  # activation mode the log must show
    linears: int  # MXFP4 linears (dense MLP + 3 MoE layers' shared experts, x2: gate_up, down)
    max_kl: float  # bound on mean KL, nats
    min_top1: float  # bound on top-1 agreement


# Measured on the 2-core CPU box (SGLang 0.5.23, served in bf16, float32 transformers reference):
#   GLM-4.5 (2026-11-30, 167 tokens): full W4A4 mean KL 0.041, top-1 0.826; experts W4A16 0.0067,
#     0.910. Bounds ~3.5x the KL, ~1.7x the disagreement.
#   GLM-5 (167 positions): quark-full W4A4 0.090, 0.832; shipped-quark W4A16 0.030, 0.928
#     (2026-12-01); served tiny-glm5-bf16 (no quantization; bf16 activations, FP8 index keys)
#     0.002, 0.988. Bounds ~3x the KL, ~2x the disagreement.
# The bounds leave room for bf16 drift and a retrained model. What they must catch: GLM-5's
# routed_scaling_factor 2.5 dropped (routed-expert output 2.5x too small) gives KL 0.56, top-1
# 0.67, applied twice 1.04, 0.52; a wrong nibble order, scale or layer mapping costs whole nats.
CHECKPOINTS = [
    Checkpoint("glm45-quark-full", "bf16", "full", "W4A4", 8, 0.15, 0.7),
    Checkpoint("glm45-quark-experts", "bf16", "experts", "W4A16", 0, 0.15, 0.7),
    Checkpoint("glm5-quark-full", "glm5-bf16", "full", "W4A4", 8, 0.25, 0.70),
    Checkpoint("glm5-shipped-quark", "glm5-bf16", None, "W4A16", 6, 0.08, 0.85),
]


@functools.cache
def reference(bf16: str) -> tuple[list[int], torch.Tensor]:
    """The held-out sample and log p(next | prefix) of the bf16 model in float32 (transformers),
    [T-1, V]; once per model."""
    ids = held_out_prompt_ids(bundled_model_path(bf16))
    model = load_hf(bundled_model_path(bf16), torch.float32)
    # GLM-5: past index_topk keys the indexer's selections enter the comparison too (FP8 index
    # keys when served): the sample reaches into the sparse regime.
    assert len(ids) > getattr(model.config, "index_topk", 0)
    return ids, reference_logprobs(model, ids)


@pytest.fixture(scope="module")
def written_servers(tmp_path_factory):
    """The checkpoints written at test time, each quantized by `sglang-mx quantize --format
    quark` and served; the servers start side by side (their cold starts overlap)."""
    written = [ck for ck in CHECKPOINTS if ck.layout is not None]
    specs = []
    for ck in written:
        ckpt = tmp_path_factory.mktemp("quark") / ck.name
        act = "mxfp4" if ck.mode == "W4A4" else "none"
        args = ["quantize", bundled_model_path(ck.bf16), str(ckpt), "--format", "quark"]
        assert main([*args, "--quark-layout", ck.layout, "--act-quant", act]) == 0
        specs.append((str(ckpt), [], None, None))
    handles = start_servers(specs)
    try:
        yield {ck.name: h for ck, h in zip(written, handles, strict=True)}
    finally:
        for h in handles:
            h.stop(wait=False)


@pytest.fixture(params=CHECKPOINTS, ids=[c.name for c in CHECKPOINTS])
def quark_server(request):
    ck = request.param
    if ck.layout is None:  # what `sglang-mx serve` serves: the session's server for it
        return request.getfixturevalue("default_server_handle"), ck
    return request.getfixturevalue("written_servers")[ck.name], ck


def test_quark_served_close_to_bf16(quark_server):
    handle, ck = quark_server
    log = handle.log_path.read_text(errors="replace")
    if ck.bf16.startswith("glm5"):
        assert "'attention_backend': 'mx_dsa'" in log
    check_mxfp4_log(log, ck.mode, ck.linears)

    ids, bf16_logprobs = reference(ck.bf16)
    kl, top1 = served_kl_top1(handle.base_url, ids, bf16_logprobs, VOCAB)
    assert kl < ck.max_kl, (ck.name, kl, top1)
    assert top1 > ck.min_top1, (ck.name, kl, top1)
