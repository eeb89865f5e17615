"""An AMD Quark MXFP4 checkpoint (experts only, w4a4) loads and serves through our method."""

from __future__ import annotations

import json
import shutil

import httpx
import pytest
from sglang_mx.assets import bundled_model_path
from sglang_mx.testing.server import start_server

pytestmark = pytest.mark.server

MX = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}


def as_quark_w4a4(dst):
    """Same tensors as the bundled MXFP4 checkpoint (Quark names experts' tensors the same way);
    only the config differs, laid out like amd/GLM-5.2-MXFP4's."""
    shutil.copytree(bundled_model_path("mxfp4"), dst)
    config = json.loads((dst / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "quark",
        "export": {"kv_cache_group": [], "pack_method": "reorder"},
        "global_quant_config": {
            "weight": {**MX, "is_dynamic": False},
            "input_tensors": {**MX, "is_dynamic": True},
            "output_tensors": None,
            "bias": None,
        },
        "exclude": [
            "lm_head",
            "re:.*self_attn.*",
            "re:.*mlp\\.gate$",
            "re:.*shared_experts.*",
            "re:model\\.layers\\.0\\.mlp.*",
        ],
    }
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return dst


def test_quark_w4a4_serves(tmp_path):
    ckpt = as_quark_w4a4(tmp_path / "quark-w4a4")
    handle = start_server(str(ckpt))
    try:
        r = httpx.post(
            f"{handle.base_url}/generate",
            json={"text": "def main():\n    ", "sampling_params": {"max_new_tokens": 8}},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        assert r.json()["meta_info"]["completion_tokens"] == 8
        log = handle.log_path.read_text(errors="replace")
        assert log.count("sglang_mx: MXFP4 experts") == 3
        assert log.count("W4A4") >= 3
    finally:
        handle.stop()
