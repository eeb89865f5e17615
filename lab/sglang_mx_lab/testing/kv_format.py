"""The error an FP8 latent cache brings by its arithmetic alone, on the reference model
(transformers' GlmMoeDsaForCausalLM), with no SGLang code in the path: each layer's stored latent
(c_kv, the output of kv_a_layernorm, which every later key and value of the layer is read from)
rounded as an FP8 cache of packed rows stores it (e4m3, one fp32 scale per 128 values = their
amax / 448, round to nearest), against the same model with it rounded to bf16 (a bf16 cache).
k_pe is stored in bf16 by both and is left as it is in both. Computed here, from the format's
definition, not with sgl_kernel_rocm's packer.

The compute dtype matters as much as the format: in float32 the format's KL is a quarter of
what a bf16 server pair measures on the prefill view; in bf16 (SGLang's dtype for the bundled
models) the rounding of every later activation moves with the latent and adds an error of the
same size, and the reference lands near the served pair's figures (issue 54: served GLM-5 pair
on 2026-12-06, 0.00146 / 0.00114 mean, 0.0040 / 0.00187 worst prompt, against the bf16 MXFP4
figures below, 0.00221 / 0.00064 and 0.0050 / 0.00086).

`python -m sglang_mx_lab.testing.kv_format` prints the figures for kv_quality's prompts
(2026-12-06, the 2-core box, prefill / decode mean, nats): float32 0.00039 / 0.00046 (logits
rounded to bf16: 0.00050 / 0.00057); bf16 with bf16 experts 0.00178 / 0.00087; bf16 with the
MXFP4 experts (the served checkpoint) 0.00221 / 0.00064."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch

from sglang_mx_lab.testing.hf_reference import greedy

FP8_MAX = 448.0  # the largest finite e4m3fn value
GROUP = 128


def round_bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(x.dtype)


def round_fp8_groups(x: torch.Tensor, group: int = GROUP) -> torch.Tensor:
    """x stored as e4m3 codes with one fp32 scale (amax / 448) per `group` values, read back."""
    g = x.float().reshape(*x.shape[:-1], -1, group)
    scale = g.abs().amax(-1, keepdim=True) / FP8_MAX
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = (g / safe).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return (codes.float() * safe).reshape(x.shape).to(x.dtype)


@contextlib.contextmanager
def latent_rounded(model, fn: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[None]:
    """Every layer's kv_a_layernorm output passed through `fn` while the block runs."""
    hooks = [
        layer.self_attn.kv_a_layernorm.register_forward_hook(lambda _m, _i, out: fn(out))
        for layer in model.model.layers
    ]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


@torch.no_grad()
def _logprobs(model, ids: list[int], fn, logits_dtype: torch.dtype | None) -> torch.Tensor:
    with latent_rounded(model, fn):
        logits = model(torch.tensor([ids])).logits[0]
    if logits_dtype is not None:  # a server running in bf16 hands out bf16 logits
        logits = logits.to(logits_dtype)
    return torch.log_softmax(logits.double(), -1)[:-1]


@torch.no_grad()
def format_kl(
    model,
    prompts: Sequence[list[int]],
    new_tokens: int = 16,
    logits_dtype: torch.dtype | None = None,
) -> dict[str, float]:
    """KL(bf16 cache || FP8 cache) of the reference model in kv_quality's two views and
    statistics: each prompt followed by the bf16-cache model's own greedy continuation, scored
    in one forward per cache; prefill = every position, decode = the continuation's positions
    while the two caches' greedy tokens agree, the first disagreement included."""
    rows = []
    for ids in prompts:
        with latent_rounded(model, round_bf16):  # through the model's own KV cache
            base = greedy(model, list(ids), new_tokens)
        with latent_rounded(model, round_fp8_groups):
            test = greedy(model, list(ids), new_tokens)
        # decode: kv_quality's steps, while the two greedy runs agree, the first difference too
        same = next((i for i, (x, y) in enumerate(zip(base, test, strict=True)) if x != y), None)
        steps = len(base) if same is None else same + 1
        full = list(ids) + base
        a = _logprobs(model, full, round_bf16, logits_dtype)
        b = _logprobs(model, full, round_fp8_groups, logits_dtype)
        kl = (a.exp() * (a - b)).sum(-1)
        rows.append((kl, kl[len(ids) - 1 : len(ids) - 1 + steps]))
    pos = sum(p.numel() for p, _ in rows)
    steps = sum(d.numel() for _, d in rows)
    return {
        "prefill_kl_mean": float(sum(p.sum() for p, _ in rows) / pos),
        "prefill_kl_max_prompt": max(float(p.mean()) for p, _ in rows),
        "decode_kl_mean": float(sum(d.sum() for _, d in rows) / steps),
        "decode_kl_max_prompt": max(float(d.mean()) for _, d in rows),
    }


# Two equivalent ways transformers computes attention: in bf16 each rounds differently.
ATTENTION_IMPLS = ("eager", "sdpa")


def served_dtype_envelope(bf16_dir, mxfp4_dir, prompts: Sequence[list[int]]) -> dict[str, float]:
    """The format's KL in a served GLM-5's arithmetic (bf16 activations, the checkpoint's MXFP4
    experts), per view and statistic the largest over ATTENTION_IMPLS. In bf16 every later
    activation's rounding moves with the latent's, so each computation is one realization of
    that noise around the format's error: on kv_quality's prompts (2026-12-06, the 2-core box)
    eager and sdpa gave 0.00273 / 0.00221 prefill mean, 0.00135 / 0.00064 decode mean and
    0.00259 / 0.00086 decode worst prompt, the served pair 0.00146, 0.00114 and 0.00187: inside
    the two. Float32 (logits rounded to bf16) gives 0.00053 / 0.00036 mean: the format's error
    without the bf16 noise."""
    from sglang_mx_lab.testing.hf_reference import load_hf_mxfp4

    model = load_hf_mxfp4(bf16_dir, mxfp4_dir, torch.bfloat16)
    runs = []
    for impl in ATTENTION_IMPLS:
        model.set_attn_implementation(impl)
        runs.append(format_kl(model, prompts))
    return {k: max(r[k] for r in runs) for k in runs[0]}


def main() -> int:
    from sglang_mx.assets import bundled_model_path

    from sglang_mx_lab.testing.hf_reference import load_hf, load_hf_mxfp4
    from sglang_mx_lab.testing.kv_quality import prompt_token_ids

    bf16, mxfp4 = bundled_model_path("glm5-bf16"), bundled_model_path("glm5-quark")
    prompts = prompt_token_ids(str(bf16))
    model = load_hf(bf16)
    for dtype in (None, torch.bfloat16):
        print(
            f"float32, logits {dtype or 'float32'}:", format_kl(model, prompts, logits_dtype=dtype)
        )
    print("bf16:", format_kl(load_hf(bf16, torch.bfloat16), prompts))
    print("bf16, MXFP4 experts:", format_kl(load_hf_mxfp4(bf16, mxfp4, torch.bfloat16), prompts))
    print(
        "bf16, MXFP4 experts, largest of",
        ATTENTION_IMPLS,
        served_dtype_envelope(bf16, mxfp4, prompts),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
