"""`--kv-cache-dtype fp8_e4m3` served end to end, each model against itself with a bf16 KV cache:
the default model (tiny GLM-5: mx_dsa, packed FP8 latent rows on a CPU box) and the GLM-4.5 one
on mx_triton, and a GLM-5 FP8 server with a planted mis-read. Five servers, started side by side.

Measure (testing/kv_quality.py): over 3 prompts (2 short, one past the DSA top-k), the full
next-token distributions (the whole 2,048-token vocabulary) of the two servers in the same
contexts, as KL(bf16 || fp8) and top-1 agreement: prefill (prompt + the bf16 greedy
continuation, scored in one forward) and decode (the greedy steps while the tokens agree, the
first disagreement included).

Bounds, from the format (issue 42; they were 0.02 / 0.05 nats, 13-28x the measured values and
set after measuring, and a group read at 1.1x its scale passed them). FP8 e4m3 rounds each
stored value within half a step, 2^-4 of it; that rounding is the error the format itself
brings, and its KL on a given model and prompt set is what the FP8 server measures against the
bf16 one (FP8_KL below; deterministic for a build: 0.0015 / 0.0007 on 2026-12-02, 0.00158 /
0.00072 on 2026-12-03, GLM-5). A read that adds an error of its own, independent of the
rounding and as large again, doubles the error variance, and KL grows with it for small errors:
so the bound is twice the format's own KL, per view (mean and worst prompt), plus 0.0005 nats
for the last digits of the measurement. The planted break, the first 128-value group of every
packed row read at 1.1x its scale (kv_plant/ beside this file: a coherent 10% error on a
quarter of the latent, 1.6x the format's largest rounding), measured 0.0080 / 0.0065 mean and
0.018 / 0.014 worst prompt (2026-12-03), 2.2-5.9x the bound (prefill mean 2.2x, decode mean
3.4x, worst prompt 4.1x / 5.9x); it is started beside the others and must fail it. Top-1
agreement is asserted in both views (TOP1).

Still open (issue 54, item 2): FP8_KL is a measurement of these same two servers, so a bug
present on the day it was measured sits inside the bound. The format's own KL, from its
arithmetic on the reference model (testing/kv_format.py: transformers' GLM-5 in float32, the
latent rounded to e4m3 with 128-value group scales against bf16; kv_quality's prompts, 16
tokens), is 0.00039 / 0.00046 mean and 0.00105 / 0.00063 worst prompt (prefill / decode;
with the logits rounded to bf16, as a bf16 server hands them out, 0.00050 / 0.00057 and
0.00104 / 0.00074; 2026-12-06, the 2-core box, transformers 5.19.0, torch 2.13.0+cpu): the
served pair measures 3.2x / 1.3x and 1.8x / 1.3x the bf16-logit figures, so on the prefill mean
the served FP8 path adds error the format does not explain (or the reference misses a served
difference: bf16 activations, MXFP4 experts), which wants finding before a multiple of the
format's KL can be the bound without being fitted to the build's own figure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sglang_mx_lab.testing import kv_quality

pytestmark = pytest.mark.server
VOCAB = 2048  # both tiny models
# Top-1 agreement: prefill over ~125 teacher-forced positions (measured 0.99 / 0.98); decode
# over the compared steps, each prompt's first disagreement included, so a prompt whose greedy
# tokens diverge costs one step of ~10 (measured 1.0 GLM-5, 0.93 GLM-4.5 with 2 of 3 diverging).
TOP1 = {"prefill_top1": 0.9, "decode_top1": 0.85}
FP8 = ["--kv-cache-dtype", "fp8_e4m3"]
# The format's own KL (nats) per model, view and statistic, measured FP8 server vs bf16 one on
# kv_quality's prompts (both 2026-12-03 on the 2-core AVX2 box; on 2026-12-02's box within 10%
# of these); the bound is twice it.
FP8_KL = {
    "glm5": {"prefill_kl_mean": 0.00158, "decode_kl_mean": 0.00072,
             "prefill_kl_max_prompt": 0.00192, "decode_kl_max_prompt": 0.00093},
    "glm45": {"prefill_kl_mean": 0.00210, "decode_kl_mean": 0.00180,
              "prefill_kl_max_prompt": 0.00273, "decode_kl_max_prompt": 0.00649},
}  # fmt: skip
SLACK = 0.0005
PLANT = Path(__file__).parent / "kv_plant"  # sitecustomize with the planted group scale


def bounds(model: str) -> dict[str, float]:
    return {k: 2 * v + SLACK for k, v in FP8_KL[model].items()}


@pytest.fixture(scope="module")
def servers():
    """{model name: (model path, its bf16-KV server, its FP8-KV server)}, and "glm5-planted"
    (the GLM-5 bf16 server, and an FP8 one whose reads carry the planted group scale): the five
    servers started side by side (cold starts overlap; a longer start budget on 2 cores)."""
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.server import default_serve_args, start_servers

    glm5, args5 = default_serve_args()
    glm45, args45 = str(bundled_model_path("mxfp4")), ["--attention-backend", "mx_triton"]
    pairs = {"glm5": (glm5, args5), "glm45": (glm45, args45)}
    specs = [(m, a + kv, None, None) for m, a in pairs.values() for kv in ([], FP8)]
    planted = {"PYTHONPATH": os.pathsep.join([str(PLANT), os.environ.get("PYTHONPATH", "")]),
               "SGLANG_MX_PLANT_KV_GROUP_SCALE": "1.1"}  # fmt: skip
    specs.append((glm5, args5 + FP8, planted, None))
    handles = start_servers(specs, timeout=600)
    try:
        out = {name: (m, *handles[2 * i : 2 * i + 2]) for i, (name, (m, _)) in
               enumerate(pairs.items())}  # fmt: skip
        yield out | {"glm5-planted": (glm5, handles[0], handles[4])}
    finally:
        for h in handles:
            h.stop(wait=False)


def _broken(model: str, s: dict[str, float]) -> list[str]:
    out = [f"{k} {s[k]:.5f} > {b:.5f}" for k, b in bounds(model).items() if s[k] > b]
    out += [f"{k} {s[k]:.3f} < {b}" for k, b in TOP1.items() if s[k] < b]
    return out


def _check(model: str, rows) -> dict[str, float]:
    s = kv_quality.summary(rows)
    print(model, s)
    assert _broken(model, s) == [], s
    return s


def test_glm5_fp8_kv_serves_packed_rows_within_the_bound(servers):
    model, bf16, fp8 = servers["glm5"]
    log = fp8.log_path.read_text(errors="replace")
    # SGLang on a CPU box: the (0, 0) capability resolves the DSA backends to flashmla_kv, whose
    # scaled FP8 layout gives the pool override_kv_cache_dim: packed rows, 656 bytes.
    assert "prefill=flashmla_kv, decode=flashmla_kv" in log
    assert "mx_dsa latent cache: packed_fp8/128 rows of 656, torch.float8_e4m3fn" in log
    assert "rows of 576, torch.bfloat16" in bf16.log_path.read_text(errors="replace")
    prompts = kv_quality.prompt_token_ids(model)
    _check("glm5", kv_quality.kv_quality(bf16.base_url, fp8.base_url, prompts, VOCAB))


def test_a_group_read_at_1_1x_its_scale_fails_the_bound(servers):
    model, bf16, planted = servers["glm5-planted"]
    prompts = kv_quality.prompt_token_ids(model)
    s = kv_quality.summary(kv_quality.kv_quality(bf16.base_url, planted.base_url, prompts, VOCAB))
    print("planted", s)
    assert _broken("glm5", s), s


def test_glm45_fp8_kv_on_mx_triton_within_the_bound(servers):
    model, bf16, fp8 = servers["glm45"]
    assert "KV Cache is allocated. dtype: torch.float8_e4m3fn" in fp8.log_path.read_text()
    prompts = kv_quality.prompt_token_ids(model)
    _check("glm45", kv_quality.kv_quality(bf16.base_url, fp8.base_url, prompts, VOCAB))
