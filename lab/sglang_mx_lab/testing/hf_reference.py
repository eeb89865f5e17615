"""Hugging Face transformers forwards of the bundled checkpoints: the reference SGLang's output is
checked against, and the perplexity evaluation. The MXFP4 reference is the bf16 model with its
experts replaced by the reference dequantization of the MXFP4 checkpoint's experts."""

from __future__ import annotations

import re
from pathlib import Path

import torch

_EXPERT = re.compile(
    r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$"
)


def load_hf(bf16_dir: str | Path, dtype: torch.dtype = torch.float32):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(bf16_dir), dtype=dtype)
    return model.eval()


@torch.no_grad()
def load_hf_mxfp4(bf16_dir: str | Path, mxfp4_dir: str | Path, dtype: torch.dtype = torch.float32):
    """bf16 model whose routed experts hold dequantize_mxfp4(checkpoint experts)."""
    from safetensors import safe_open
    from sgl_kernel_rocm.mx import dequantize_mxfp4

    model = load_hf(bf16_dir, dtype)
    with safe_open(str(Path(mxfp4_dir) / "model.safetensors"), framework="pt") as f:
        for name in f.keys():
            m = _EXPERT.match(name)
            if not m:
                continue
            layer, expert, proj = int(m.group(1)), int(m.group(2)), m.group(3)
            # A checkpoint's MTP layer (past the model's layers) and unpacked experts: not ours
            if layer >= len(model.model.layers) or f.get_slice(name).get_dtype() != "U8":
                continue
            w = dequantize_mxfp4(f.get_tensor(name), f.get_tensor(name + "_scale"), dtype=dtype)
            experts = model.model.layers[layer].mlp.experts
            inter = experts.down_proj.shape[-1]
            if proj == "gate_proj":
                experts.gate_up_proj[expert, :inter] = w
            elif proj == "up_proj":
                experts.gate_up_proj[expert, inter:] = w
            else:
                experts.down_proj[expert] = w
    return model


@torch.no_grad()
def greedy(model, input_ids: list[int], max_new_tokens: int) -> list[int]:
    out = model.generate(
        torch.tensor([input_ids]),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    )
    return out[0, len(input_ids) :].tolist()


@torch.no_grad()
def token_logprobs(model, input_ids: list[int]) -> torch.Tensor:
    """log p(input_ids[i] | input_ids[:i]) for i >= 1, float64."""
    logits = model(torch.tensor([input_ids])).logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)
    return logp[:-1].gather(1, torch.tensor(input_ids[1:]).unsqueeze(1)).squeeze(1)


@torch.no_grad()
def perplexity(model, token_ids: list[int], window: int = 256, max_windows: int = 64) -> float:
    total, count = 0.0, 0
    for i in range(min(max_windows, (len(token_ids) - 1) // window)):
        chunk = token_ids[i * window : (i + 1) * window + 1]
        lp = token_logprobs(model, chunk)
        total -= float(lp.sum())
        count += lp.numel()
    return float(torch.exp(torch.tensor(total / count)))


def quality_context(bands: list[dict], factor: float) -> int:
    """End of the longest run of position bands ({"band": [a, b], "perplexity": p}), from the
    first, whose perplexity stays <= factor x the first band's: where a model's quality holds."""
    first = bands[0]["perplexity"]
    end = bands[0]["band"][1]
    for b in bands[1:]:
        if b["perplexity"] > factor * first:
            break
        end = b["band"][1]
    return end
