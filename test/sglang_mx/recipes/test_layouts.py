"""The production layouts at two ranks on the CPU box (sglang_mx_lab.testing.layout_serving): each
launch recipe's flag set (recipes/mi355x.json, scaled by recipes.cpu_args: TP4/EP4 + EAGLE 5/1/6,
TP8 + EAGLE 5/1/6, TP8/DP8-attention/EP8 + MTP 1/1/2, all with FP8 KV and the glm47/glm45 parsers)
and SGLang's own EAGLE default, through mx_dsa on the default tiny GLM-5 in float32.

Checked: every layout starts (a recipe whose flags crash fails here), resolves the layout it
asked for, needs no SGLANG_CPU_OMP_THREADS_BIND from the user, serves greedy tokens equal to the
TP1 server with the same KV dtype, reports its drafts' acceptance, and a multi-step draft is
accepted beyond its first token; a bounded hostile campaign runs against the DP-attention + FP8
KV + EAGLE server with no 5xx and no dead worker."""

from __future__ import annotations

import httpx
import pytest
from sglang_mx.seam.cpu_binding import BIND_ENV
from sglang_mx_lab.testing import layout_serving as L

pytestmark = pytest.mark.server

BY_NAME = {lay.name: lay for lay in L.layouts()}
CAMPAIGN_SEED, CAMPAIGN_S, MIN_CASES = 20261201, 15.0, 20


@pytest.fixture(scope="module")
def servers():
    import os

    from sglang_mx_lab.testing.server import default_serve_args, start_servers

    model, base = default_serve_args()
    env = {k: v for k, v in os.environ.items() if k != BIND_ENV}  # binding is serve's job
    specs = [(model, [*base, *lay.args], env, None) for lay in BY_NAME.values()]
    handles = start_servers(specs, timeout=900)
    try:
        yield dict(zip(BY_NAME, handles, strict=True))
    finally:
        for h in handles:
            h.stop(wait=False)


@pytest.fixture(scope="module")
def served(servers):
    return {name: L.serve_prompts(h.base_url) for name, h in servers.items()}


WANT = {  # what SGLang must resolve each layout to (2 ranks stand for the node's 4 or 8)
    "tp1-eagle-default": {"tp_size": 1, "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                          "speculative_num_draft_tokens": 4},
    "recipe:mi355x-tp4x2-router": {"tp_size": 2, "ep_size": 2, "speculative_num_steps": 5,
                                   "speculative_num_draft_tokens": 6},
    "recipe:mi355x-tp8": {"tp_size": 2, "speculative_num_steps": 5},
    "recipe:mi355x-tp8-dpattn": {"tp_size": 2, "ep_size": 2, "attn_dp_size": 2,
                                 "speculative_num_steps": 1},
}  # fmt: skip


@pytest.mark.parametrize("name", [n for n in BY_NAME if BY_NAME[n].reference])
def test_layout_serves_the_reference_greedy_tokens(servers, served, name):
    lay, handle = BY_NAME[name], servers[name]
    info = L.server_info(handle.base_url)
    got = L.effective(info)
    assert {k: got.get(k) for k in WANT[name]} == WANT[name], got
    assert info["attention_backend"] == "mx_dsa" and info["kv_cache_dtype"] == "fp8_e4m3"
    ref = served[lay.reference]
    for prompt, mine, theirs in zip(L.PROMPTS, served[name].outputs, ref.outputs, strict=True):
        assert mine == theirs, f"{name} vs {lay.reference} on {prompt!r}"
    s = served[name]
    assert s.verify_steps > 0 and s.accept_length is not None and s.accept_length > 1.0, s
    if got.get("tp_size", 1) > 1:  # ranks bound by the CPU platform, not by the user
        assert f"sglang_mx: {got['tp_size']} ranks on this CPU node" in handle.log_path.read_text(
            errors="replace"
        )


# A one-step draft keeps at most one draft per verify, so it decodes at most 2 tokens per verify;
# a chain of five that decodes more has had drafts 2-5 kept.
ONE_STEP_MAX = 2.0


def test_multi_step_drafts_are_accepted_beyond_the_first(served):
    """EAGLE 5/1/6 at TP2 decodes more output tokens per verify than any one-step draft can (2):
    its later draft steps, each attending the earlier drafts' KV, must propose tokens that verify
    keeps. Counted from the tokens each request returned over SGLang's verify count per request,
    so drafts kept past max_new_tokens do not count. With the distilled NextN draft
    (docs/tiny-model.md) 5/1/6 decodes 2.22 per verify on these prompts and 1/1/2 1.54
    (2026-12-05). Planted (docs/results/draft-plants-cpu.json): draft steps 2-5 with their
    attention output zeroed decode 1.875 and fail here; steps planned as step 1 or writing no
    latent still decode 2.31 (the tiny draft leans little on its own chain's KV) and fail
    test_draft_steps.py instead."""
    five = served["recipe:mi355x-tp8"]
    one = served["recipe:mi355x-tp8-dpattn"]
    assert one.accept_length <= ONE_STEP_MAX, one
    assert five.accept_length > ONE_STEP_MAX, (five, one)
    assert five.kept_drafts > one.kept_drafts, (five, one)


def test_hostile_campaign_against_dp_attention_fp8_eagle(servers):
    from sglang_mx_lab.testing.campaign import assert_no_hostile_request_fails
    from sglang_mx_lab.testing.hostile import Target

    url = servers["recipe:mi355x-tp8-dpattn"].base_url
    served = httpx.get(url + "/v1/models", timeout=30).json()["data"][0]
    info = httpx.get(url + "/get_model_info", timeout=30).json()
    target = Target(served["id"], info["vocab_size"], info["context_length"])
    sent, took = assert_no_hostile_request_fails(
        url, target, 100_000, CAMPAIGN_SEED, CAMPAIGN_S, MIN_CASES
    )
    print(f"{sent} hostile requests in {took:.0f} s (DP attention + FP8 + EAGLE)")
    assert sent >= MIN_CASES
    assert L.greedy(url, L.PROMPTS[0])["output_ids"]  # still serving
