"""scripts/train_tiny_glm5_long.py keeps what a sitting trained: weights are written every
--save-every minutes and when the run is stopped (SIGTERM after its first step: the step ends,
the weights and a record saying `final: false` are written, the process exits 0), and the
written weights load and differ from the init's where the stage trains them (the indexers).
Real runs of the script on the bundled model at 256 tokens, a few seconds each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from safetensors.torch import load_file
from sglang_mx.assets import bundled_model_path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "train_tiny_glm5_long.py"


def _start(out: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, str(SCRIPT), "--stage", "warmup", "--seq-lens", "256",
           "--threads", "1", "--out", str(out), *extra]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "python"), str(ROOT / "lab"), str(ROOT / "scripts"),
         os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)  # fmt: skip


def _indexer_changed(out: Path) -> bool:
    init = load_file(str(Path(bundled_model_path("glm5-bf16")) / "model.safetensors"))
    got = load_file(str(out / "model.safetensors"))
    assert set(got) == set(init)
    names = [n for n in got if ".indexer." in n]
    assert names, sorted(got)[:10]
    return any(not got[n].equal(init[n]) for n in names)


def test_weights_are_saved_every_interval_and_at_the_end(tmp_path):
    out = tmp_path / "w"
    proc = _start(out, "--max-steps", "3", "--save-every", "0.0001")
    log, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, log
    saves = [line for line in log.splitlines() if line.startswith("wrote ")]
    assert len(saves) == 4, log  # after each of the 3 steps, then the end
    record = json.loads((out / "long-training.json").read_text())
    assert record["steps"] == 3 and record["final"] is True, record
    assert _indexer_changed(out)


def test_a_stopped_run_saves_what_it_trained(tmp_path):
    out = tmp_path / "w"
    proc = _start(out, "--minutes", "30", "--save-every", "0")
    lines = []
    deadline = time.monotonic() + 600
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("step 1 "):
            proc.send_signal(signal.SIGTERM)
            break
        assert time.monotonic() < deadline, "".join(lines)
    rest, _ = proc.communicate(timeout=300)
    log = "".join(lines) + rest
    assert proc.returncode == 0, log
    record = json.loads((out / "long-training.json").read_text())
    assert record["final"] is False and 1 <= record["steps"] <= 2, record
    assert _indexer_changed(out)
