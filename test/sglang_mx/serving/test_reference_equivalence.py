"""SGLang with the sglang_mx plugin computes what Hugging Face transformers computes.

- bf16 checkpoint served in float32: greedy tokens equal a transformers float32 forward.
- MXFP4 checkpoint served (bf16 activations): per-token log-probs match a transformers float32
  forward of the same model with experts = reference dequantization of the MXFP4 experts.
- MXFP4 vs bf16 at the model level: the quantization error stays small (stated below).
"""

from __future__ import annotations

import httpx
import pytest
import torch
from sglang_mx.assets import bundled_model_path
from sglang_mx_lab.testing.hf_reference import greedy, load_hf, load_hf_mxfp4, token_logprobs
from sglang_mx_lab.testing.served_distribution import HELD_OUT_TEXT
from sglang_mx_lab.testing.server import start_server

pytestmark = pytest.mark.server

PROMPTS = [
    "import os\nimport sys\n\n\ndef main(",
    "class Config:\n    def __init__(self, path",
    '"""Utilities for reading and writing files."""\n\nfrom __future__ import',
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(bundled_model_path("bf16"))


@pytest.fixture(scope="module")
def bf16_fp32_server():
    handle = start_server(bundled_model_path("bf16"), ["--dtype", "float32"])
    try:
        yield handle.base_url
    finally:
        handle.stop(wait=False)


def generate(url: str, ids: list[int], **sampling) -> dict:
    r = httpx.post(
        f"{url}/generate",
        json={
            "input_ids": ids,
            "sampling_params": sampling,
            "return_logprob": True,
            "logprob_start_len": 0,
        },
        timeout=300,
    )
    assert r.status_code == 200, r.text
    return r.json()


def test_bf16_greedy_equals_transformers(bf16_fp32_server, tokenizer):
    model = load_hf(bundled_model_path("bf16"), torch.float32)
    for prompt in PROMPTS:
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        served = generate(bf16_fp32_server, ids, max_new_tokens=32, temperature=0, ignore_eos=True)[
            "output_ids"
        ]
        assert served == greedy(model, ids, 32), prompt


def test_mxfp4_served_logprobs_match_reference(mxfp4_server, tokenizer):
    ids = tokenizer.encode(HELD_OUT_TEXT, add_special_tokens=False)
    meta = generate(mxfp4_server, ids, max_new_tokens=1, temperature=0)["meta_info"]
    served = torch.tensor(
        [lp for lp, _, _ in meta["input_token_logprobs"][1:]], dtype=torch.float64
    )
    ref = token_logprobs(
        load_hf_mxfp4(bundled_model_path("bf16"), bundled_model_path("mxfp4")), ids
    )
    assert served.shape == ref.shape
    # The server keeps activations in bf16 (8 mantissa bits, ~0.4% per rounding) through 4
    # layers; the fp32 reference does not. 0.1 nats per token bounds that drift; a wrong expert
    # layout or scale would move log-probs by whole nats.
    assert (served - ref).abs().max() < 0.1, (served - ref).abs().max()


def test_mxfp4_logits_close_to_bf16(tokenizer):
    ids = tokenizer.encode(HELD_OUT_TEXT * 2, add_special_tokens=False)
    ref = load_hf(bundled_model_path("bf16"), torch.float32)
    q = load_hf_mxfp4(bundled_model_path("bf16"), bundled_model_path("mxfp4"), torch.float32)
    with torch.no_grad():
        a = torch.log_softmax(ref(torch.tensor([ids])).logits[0].double(), -1)
        b = torch.log_softmax(q(torch.tensor([ids])).logits[0].double(), -1)
    kl = (a.exp() * (a - b)).sum(-1)
    top1 = (a.argmax(-1) == b.argmax(-1)).double().mean()
    # MXFP4 moves each expert weight by up to 1/6 of its block's largest value. Measured on the
    # bundled model (2026-11-30, 2,649 training steps): mean KL 0.0065 nats, top-1 agreement
    # 0.911 (held-out perplexity +0.20%). The bounds (~8x the KL, ~3x the disagreement) leave
    # room for another training run and still catch a broken quantizer or expert layout,
    # which costs whole nats.
    assert kl.mean() < 0.05, kl.mean()
    assert top1 > 0.75, top1
