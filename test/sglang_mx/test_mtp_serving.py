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
    from sglang_mx.testing.server import start_server

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


def test_mxfp4_eh_proj_draft_serves_the_same_greedy_tokens(mxfp4_eh_proj_server, default_server):
    log = mxfp4_eh_proj_server.log_path.read_text(errors="replace")
    assert "sglang_mx: MXFP4 linear model.eh_proj" in log  # the draft's eh_proj is ours, MXFP4
    prompt = PROMPTS[0]
    with_mtp = greedy(mxfp4_eh_proj_server.base_url, prompt)
    assert with_mtp["output_ids"] == greedy(default_server, prompt)["output_ids"]
    assert with_mtp["meta_info"]["spec_verify_ct"] > 0
