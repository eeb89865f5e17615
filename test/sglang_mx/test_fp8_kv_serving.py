"""`--kv-cache-dtype fp8_e4m3` served end to end, each model against itself with a bf16 KV cache:
the default model (tiny GLM-5: mx_dsa, packed FP8 latent rows on a CPU box) and the GLM-4.5 one
on mx_triton. Four servers, started side by side (their cold starts overlap).

Measure (testing/kv_quality.py): over 3 prompts (2 short, one past the DSA top-k), the full
next-token distributions (the whole 2,048-token vocabulary) of the two servers in the same
contexts, as KL(bf16 || fp8) and top-1 agreement: prefill (prompt + the bf16 greedy
continuation, scored in one forward) and decode (the greedy steps while the tokens agree, the
first disagreement included).

Measured on the 2-core x86_64 CPU box, 2026-12-02 (this test, 3 prompts x 16 tokens):
GLM-5 mean KL 0.0015 (prefill) / 0.0007 (decode) nats, worst prompt 0.0018 / 0.0011, prefill
top-1 0.98, greedy tokens equal on 3/3 prompts; GLM-4.5 0.0021 / 0.0020, worst 0.0026 / 0.0059,
prefill top-1 0.98, greedy equal 1/3. A wider run the day before (5 short prompts and the long
one, 24 tokens): GLM-5 0.0024 / 0.0031, worst 0.0079; GLM-4.5 0.0021 / 0.0028, worst 0.0059.
Bounds: mean KL <= 0.02 nats and worst prompt <= 0.05 (over 6x the largest measured values:
what they bound is FP8's rounding, at most 2^-4 relative per stored value, on a model whose
bf16 greedy choices are not all peaked), prefill top-1 >= 0.9 (~125 teacher-forced positions;
measured 0.98). Planted mis-reads fail them: packed rows read without their group
scales (the CPU's torch path), FP8 keys read at 1.5x their scale in mx_triton's decode.
"""

from __future__ import annotations

import pytest
from sglang_mx.testing import kv_quality

pytestmark = pytest.mark.server
VOCAB = 2048  # both tiny models
KL_MEAN, KL_PROMPT, TOP1 = 0.02, 0.05, 0.9
FP8 = ["--kv-cache-dtype", "fp8_e4m3"]


@pytest.fixture(scope="module")
def servers():
    """{model name: (model path, its bf16-KV server, its FP8-KV server)}: the four servers
    started side by side (cold starts overlap; a longer start budget, four at once on 2 cores)."""
    from sglang_mx.assets import bundled_model_path
    from sglang_mx.testing.server import default_serve_args, start_servers

    glm5, args5 = default_serve_args()
    glm45, args45 = str(bundled_model_path("mxfp4")), ["--attention-backend", "mx_triton"]
    pairs = {"glm5": (glm5, args5), "glm45": (glm45, args45)}
    specs = [(m, a + kv, None, None) for m, a in pairs.values() for kv in ([], FP8)]
    handles = start_servers(specs, timeout=600)
    try:
        yield {name: (m, *handles[2 * i : 2 * i + 2]) for i, (name, (m, _)) in
               enumerate(pairs.items())}  # fmt: skip
    finally:
        for h in handles:
            h.stop(wait=False)


def _check(rows) -> dict[str, float]:
    s = kv_quality.summary(rows)
    print(s)
    assert s["prefill_kl_mean"] <= KL_MEAN and s["decode_kl_mean"] <= KL_MEAN, s
    assert s["prefill_kl_max_prompt"] <= KL_PROMPT and s["decode_kl_max_prompt"] <= KL_PROMPT, s
    assert s["prefill_top1"] >= TOP1, s
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
    _check(kv_quality.kv_quality(bf16.base_url, fp8.base_url, prompts, VOCAB))


def test_glm45_fp8_kv_on_mx_triton_within_the_bound(servers):
    model, bf16, fp8 = servers["glm45"]
    assert "KV Cache is allocated. dtype: torch.float8_e4m3fn" in fp8.log_path.read_text()
    prompts = kv_quality.prompt_token_ids(model)
    _check(kv_quality.kv_quality(bf16.base_url, fp8.base_url, prompts, VOCAB))
