"""MTP speculative decoding on the default model (`sglang-mx serve --mtp`: SGLang's EAGLE over
the tiny GLM-5's trained NextN layer, through mx_dsa's target-verify and draft-extend forwards on
the CPU platform): greedy tokens equal the server without MTP, and drafts are accepted (SGLang's
own accept length > 1). Hostile requests against it: test_hostile_campaign.py ("glm5-mtp")."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.server

PROMPTS = (
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    def __init__(self):\n        self.",
)
NEW_TOKENS = 32


def greedy(url: str, prompt: str) -> dict:
    body = {"text": prompt, "sampling_params": {"max_new_tokens": NEW_TOKENS, "temperature": 0}}
    r = httpx.post(f"{url}/generate", json=body, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()


def test_mtp_server_runs_eagle_through_mx_dsa(mtp_server_handle):
    log = mtp_server_handle.log_path.read_text(errors="replace")
    assert "'speculative_algorithm': 'EAGLE'" in log
    assert "'attention_backend': 'mx_dsa'" in log
    assert "type=GlmMoeDsaForCausalLMNextN" in log  # the draft: the checkpoint's NextN layer


def test_greedy_tokens_equal_without_mtp_and_drafts_are_accepted(mtp_server, default_server):
    verify_steps = tokens = 0
    for prompt in PROMPTS:
        with_mtp, without = greedy(mtp_server, prompt), greedy(default_server, prompt)
        assert with_mtp["output_ids"] == without["output_ids"], prompt
        meta = with_mtp["meta_info"]
        assert meta["completion_tokens"] == NEW_TOKENS
        verify_steps += meta["spec_verify_ct"]
        tokens += meta["completion_tokens"]
        assert "spec_verify_ct" not in without["meta_info"] or not without["meta_info"].get(
            "spec_verify_ct"
        )
    # accept length: tokens per target forward (1 = every draft rejected)
    assert tokens / verify_steps > 1.0, (tokens, verify_steps)
