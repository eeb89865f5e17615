"""MTP speculative decoding on the default model (`sglang-mx serve --mtp`: SGLang's EAGLE over
the tiny GLM-5's trained NextN layer, through mx_dsa's target-verify and draft-extend forwards on
the CPU platform): greedy tokens equal the server without MTP, and drafts are accepted, judged by
SGLang's own count of accepted drafts (`spec_num_correct_drafts`). Hostile requests against it:
test_hostile_campaign.py ("glm5-mtp")."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.server

PROMPTS = (
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    def __init__(self):\n        self.",
    "for i in range(10):\n    ",
    "def quicksort(xs):\n",
    "# parse the arguments\nparser = argparse.",
)
NEW_TOKENS = 32
# The floor comes from the draft's own record, not from this test's runs: the distillation
# script (scripts/distill_tiny_glm5_mtp.py) measured on 96 held-out continuations that the NextN
# layer's first draft equals the main model's greedy token 0.715 of the time
# (docs/results/mtp-distill-training-cpu.json, held_out_after.step1_agrees_with_main_greedy).
# A served 1/1/2 chain keeps a draft exactly when it is that token, so the served rate estimates
# the same share, on other text (six short code prompts, not corpus continuations, and the
# served chain's keys, not the script's simulated ones): the floor is HELD_OUT_SHARE of it.
# Measured over PROMPTS (greedy, so deterministic per build), EAGLE 1/1/2, SGLang 0.5.23, the
# 2-core CPU box: the distilled draft (2026-12-05) bf16 eh_proj 62 / 124 = 0.500 (0.70 of the
# record), eh_proj MXFP4 63 / 123 = 0.512; the draft it replaced (2026-12-01) 29 / 157 = 0.185,
# MXFP4 27 / 159 = 0.170, eh_proj zeroed 0 / 186 = 0. (Until 2026-12-06 the floor was 0.25, half
# this test's own 0.500.)
DISTILL_RECORD = Path(__file__).parents[3] / "docs/results/mtp-distill-training-cpu.json"
HELD_OUT_SHARE = 0.5


def min_accept_rate() -> float:
    record = json.loads(DISTILL_RECORD.read_text())
    return HELD_OUT_SHARE * record["held_out_after"]["step1_agrees_with_main_greedy"]


# MXFP4 eh_proj against the bf16 one: rounding may flip a few drafts, not a tenth of them.
EH_PROJ_MARGIN = 0.05


def greedy(url: str, prompt: str) -> dict:
    # ignore_eos: every prompt runs NEW_TOKENS steps, so the count below is over the same steps
    # whatever the weights (the agent fine-tune of 2026-12-06 ends one prompt at its 9th token)
    params = {"max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}
    body = {"text": prompt, "sampling_params": params}
    r = httpx.post(f"{url}/generate", json=body, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()


def test_mtp_server_runs_eagle_through_mx_dsa(mtp_server_handle):
    log = mtp_server_handle.log_path.read_text(errors="replace")
    assert "'speculative_algorithm': 'EAGLE'" in log
    assert "'attention_backend': 'mx_dsa'" in log
    assert "type=GlmMoeDsaForCausalLMNextN" in log  # the draft: the checkpoint's NextN layer


def acceptance(url: str, reference: str | None = None) -> float:
    """Drafts kept in the output / proposed over PROMPTS from SGLang's counters (meta_info), with
    greedy tokens equal to `reference`'s (a server without MTP) where given."""
    correct = proposed = 0
    for prompt in PROMPTS:
        got = greedy(url, prompt)
        meta = got["meta_info"]
        if reference is not None:
            assert got["output_ids"] == greedy(reference, prompt)["output_ids"], prompt
        assert meta["completion_tokens"] == NEW_TOKENS
        # Every decode token comes from a verify step (one each) or a kept draft; the first
        # token is the prefill's. SGLang's correct-draft count also holds the drafts the last
        # verify kept past max_new_tokens (at most one: MTP 1/1/2 proposes one per verify), so
        # only drafts that became output count.
        kept = NEW_TOKENS - 1 - meta["spec_verify_ct"]
        assert 0 <= meta["spec_num_correct_drafts"] - kept <= 1, meta
        correct += kept
        proposed += meta["spec_num_proposed_drafts"]
    return correct / proposed


def test_greedy_tokens_equal_without_mtp_and_drafts_are_accepted(mtp_server, default_server):
    without = greedy(default_server, PROMPTS[0])["meta_info"]
    assert not without.get("spec_verify_ct"), without  # the reference server does not speculate
    rate, floor = acceptance(mtp_server, reference=default_server), min_accept_rate()
    assert rate >= floor, f"accepted / proposed drafts {rate:.3f} < {floor:.3f}"


@pytest.fixture(scope="module")
def mxfp4_eh_proj_server(tmp_path_factory):
    """The default model as GLM-5 / GLM-5.1's Quark exports ship the MTP layer: its `eh_proj`
    MXFP4 (uint8 weight + E8M0 scale, no longer in the exclude list), served with MTP."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file
    from sgl_kernel_rocm.mx import quantize_mxfp4
    from sglang_mx.assets import bundled_model_path
    from sglang_mx.cli.serve import MTP_ARGS
    from sglang_mx_lab.testing.server import start_server

    src = bundled_model_path("glm5-quark")
    dst = tmp_path_factory.mktemp("glm5-eh-proj") / "ckpt"
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    name = f"model.layers.{config['num_hidden_layers']}.eh_proj"
    config["quantization_config"]["exclude"].remove(name)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    tensors = load_file(str(dst / "model.safetensors"))
    tensors[f"{name}.weight"], tensors[f"{name}.weight_scale"] = quantize_mxfp4(
        tensors[f"{name}.weight"].float()
    )
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    handle = start_server(str(dst), ["--enable-cache-report", *MTP_ARGS])
    try:
        yield handle
    finally:
        handle.stop(wait=False)


def test_mxfp4_eh_proj_draft_serves_the_same_greedy_tokens(mxfp4_eh_proj_server, mtp_server):
    """Greedy verification keeps the target's tokens whatever the draft proposes, so the MXFP4
    eh_proj is judged by its drafts: accepted as often as the bf16 eh_proj's, within a margin
    (a zeroed eh_proj is accepted 0 times in 186)."""
    log = mxfp4_eh_proj_server.log_path.read_text(errors="replace")
    assert "sglang_mx: MXFP4 linear model.eh_proj" in log  # the draft's eh_proj is ours, MXFP4
    rate = acceptance(mxfp4_eh_proj_server.base_url, reference=mtp_server)
    bf16_rate = acceptance(mtp_server)
    assert rate >= bf16_rate - EH_PROJ_MARGIN, (
        f"MXFP4 eh_proj drafts accepted {rate:.3f} vs bf16 eh_proj {bf16_rate:.3f} "
        f"(margin {EH_PROJ_MARGIN})"
    )


def test_run_acceptance_from_prometheus_equals_sglangs_per_request_counts(mtp_server):
    """bench's run-level accept length (bench/run/acceptance.py: generation tokens / verify steps
    from SGLang's Prometheus counters, what `bench verify` holds a claimed draft to) equals the
    sum of the same per-request counts SGLang reports in meta_info, on the live EAGLE server."""
    import asyncio

    from sglang_mx.bench.load import promscrape
    from sglang_mx.bench.run import acceptance as run_acceptance

    async def scrape():
        async with httpx.AsyncClient(timeout=30) as client:
            return await promscrape.scrape(client, mtp_server)

    before = asyncio.run(scrape())
    assert before is not None, "the MTP session server runs without --enable-metrics"
    metas = [greedy(mtp_server, p)["meta_info"] for p in PROMPTS[:3]]
    after = asyncio.run(scrape())
    got = run_acceptance.measured(promscrape.counter_delta(before, after))
    tokens = sum(m["completion_tokens"] for m in metas)
    verify = sum(m["spec_verify_ct"] for m in metas)
    assert got.speculative and got.counts["verify_steps"] == verify, (got, metas)
    assert got.accept_length == pytest.approx(tokens / verify)
