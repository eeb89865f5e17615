"""kv_format: the FP8 latent rounding as the format defines it (e4m3, one amax / 448 scale per
128 values), checked against e4m3's own spacing, and the format's KL on the reference model."""

from __future__ import annotations

import torch
from sglang_mx_lab.testing import kv_format as F


def test_group_rounding_stays_within_half_an_e4m3_step():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(6, 512, generator=gen) * torch.logspace(-3, 2, 6).unsqueeze(1)
    x[2, 128:256] = 0.0  # an all-zero group reads back as zeros, not NaN
    y = F.round_fp8_groups(x)
    g, r = x.view(6, 4, 128), y.view(6, 4, 128)
    scale = g.abs().amax(-1, keepdim=True) / F.FP8_MAX
    # the largest value of a group is 448 x its scale: exact
    top = g.abs().argmax(-1, keepdim=True)
    assert torch.allclose(r.gather(-1, top), g.gather(-1, top), rtol=1e-6)
    # e4m3 keeps 3 mantissa bits (step 2^-3 of the value's power of two) down to 2^-6, and
    # subnormal steps of 2^-9 below it: half a step, in units of the group scale
    unit = g.abs() / scale.clamp_min(1e-30)
    step = torch.where(unit >= 2**-6, 2.0 ** (torch.floor(torch.log2(unit.clamp_min(2**-6))) - 3),
                       torch.full_like(unit, 2**-9))  # fmt: skip
    assert ((r - g).abs() <= step / 2 * scale * (1 + 1e-6) + 1e-12).all()
    assert torch.equal(y[2, 128:256], torch.zeros(128)) and not y.isnan().any()
    assert not torch.equal(y, x)  # it rounds


def test_format_kl_of_the_reference_model_is_small_and_positive():
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.hf_reference import load_hf
    from transformers import AutoTokenizer

    path = bundled_model_path("glm5-bf16")
    ids = AutoTokenizer.from_pretrained(str(path)).encode("def fibonacci(n):\n    ")
    kl = F.format_kl(load_hf(path), [ids], new_tokens=2)
    # 2026-12-06, kv_quality's 3 prompts + 16 tokens: 0.00039 / 0.00046 mean (prefill / decode)
    assert all(0 < v < 0.01 for v in kl.values()), kl
