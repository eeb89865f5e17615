"""A real SGLang server refuses a truncated checkpoint with a message naming file and problem."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from sglang_mx.assets import bundled_model_path
from sglang_mx_lab.testing.server import WORKER_START_LINES, start_server

pytestmark = pytest.mark.server


def test_server_rejects_truncated_checkpoint(tmp_path):
    ckpt = tmp_path / "truncated"
    shutil.copytree(bundled_model_path("mxfp4"), ckpt)
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4096])
    with pytest.raises(RuntimeError) as exc:
        start_server(str(ckpt), timeout=240)
    msg = str(exc.value)
    assert "exited with code" in msg
    assert f"{weights}: tensor" in msg and "truncated" in msg
    # Refused by the launching process (ServerArgs.check_server_args), before any worker started
    # to initialise a model: none of the lines a scheduler prints on its way there.
    log = Path(re.search(r"log (\S+):\n", msg).group(1)).read_text(errors="replace")
    for line in WORKER_START_LINES:  # test_server.py checks SGLang really prints them
        assert line not in log, f"a worker printed {line!r}: {log[-2000:]}"


def test_server_rejects_quark_checkpoint_missing_a_scale(tmp_path):
    from safetensors.torch import load_file, save_file
    from sglang_mx.cli.main import main

    ckpt = tmp_path / "quark"
    assert main(["quantize", bundled_model_path("bf16"), str(ckpt), "--format", "quark"]) == 0
    weights = ckpt / "model.safetensors"
    tensors = load_file(str(weights))
    del tensors["model.layers.1.mlp.shared_experts.down_proj.weight_scale"]
    save_file(tensors, str(weights), metadata={"format": "pt"})
    with pytest.raises(RuntimeError) as exc:
        start_server(str(ckpt), timeout=240)
    msg = str(exc.value)
    assert "exited with code" in msg
    assert (
        "tensor model.layers.1.mlp.shared_experts.down_proj.weight is packed MXFP4 but its scale "
        "tensor model.layers.1.mlp.shared_experts.down_proj.weight_scale is missing"
    ) in msg
