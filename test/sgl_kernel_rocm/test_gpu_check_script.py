"""scripts/gpu_check.sh is ready before a GPU is lent: its bash parses, its plan covers GLM-5.2's
shapes and fits the budget, and its CPU dry run (Triton interpreter, tiny shapes) runs every case
kind end to end and writes the JSON + markdown the docs take."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Loaded by path under its own name: the script's sibling modules (plan, moe, attention) are
# plain top-level names on its own sys.path and must not leak into the test session's.
_spec = importlib.util.spec_from_file_location(
    "gpu_check_plan", ROOT / "benchmark" / "gpu_check" / "plan.py"
)
P = importlib.util.module_from_spec(_spec)
sys.modules["gpu_check_plan"] = P  # dataclasses look their module up there
_spec.loader.exec_module(P)


def test_script_parses():
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_check.sh")], check=True)


def test_plan_covers_glm_shapes_and_trims_to_budget():
    full = P.build_plan()
    moe = {(c.params["layout"], c.params["tokens"]) for c in full if c.kind == "moe"}
    assert moe == {(lay, m) for lay in ("TP8", "EP8") for m in (1, 4, 16, 64, 256)}
    tp8 = next(c for c in full if c.kind == "moe" and c.params["layout"] == "TP8").params
    ep8 = next(c for c in full if c.kind == "moe" and c.params["layout"] == "EP8").params
    assert (tp8["experts"], tp8["hidden"], tp8["inter"]) == (256, 6144, 2048 // 8)
    assert (ep8["experts"], ep8["hidden"], ep8["inter"]) == (256 // 8, 6144, 2048)
    attn = [c.params for c in full if c.kind in ("mla", "dsa")]
    assert {a["heads"] for a in attn} == {8, 64} and {a["top_k"] for a in attn} == {2048}
    assert min(a["ctx"] for a in attn) == 4096 and max(a["ctx"] for a in attn) >= 20000
    assert min(a["batch"] for a in attn) == 1 and max(a["batch"] for a in attn) == 128

    kept, dropped = P.trim(full, 200.0)
    assert dropped and P.estimate(kept) <= 200.0
    assert all(c in kept for c in full if c.priority == 0), "correctness is never trimmed"
    # Nothing of lower priority is kept while something of higher priority was dropped for a
    # cost it could have used (greedy by priority, cheapest fill-ins after).
    assert min(c.priority for c in dropped) >= 1
    all_kept, none = P.trim(full, P.estimate(full))
    assert len(all_kept) == len(full) and not none


@pytest.mark.timeout(240)
def test_dry_run_writes_results(tmp_path):
    env = {
        **os.environ,
        "OUT": str(tmp_path),
        "GPU_CHECK_DRY_RUN": "1",
        "GPU_CHECK_STEPS": "check",
        "PYTHON": sys.executable,
        "PYTHONPATH": f"{ROOT / 'python'}:{ROOT / 'sgl-kernel-rocm'}",
    }
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=230)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    report = json.loads((tmp_path / "docs" / "results" / "gpu-check-cpu.json").read_text())
    assert report["dry_run"] and report["plan"]["kept"] == len(report["rows"])
    kinds = {r["kind"]: r for r in report["rows"]}
    for kind in ("check_moe", "check_mla", "check_dsa", "check_indexer", "moe", "mla", "dsa",
                 "indexer"):  # fmt: skip
        assert kinds[kind]["status"] == "ok", kinds[kind]
    assert kinds["moe"]["us"] > 0 and kinds["mla"]["us"] > 0
    # Without a bf16-weight MoE in the tree the rows say so instead of failing.
    bf16 = kinds["moe_bf16"]["status"]
    assert bf16 == "ok" or bf16.startswith("skipped: no bf16-weight MoE"), bf16
    md = (tmp_path / "docs" / "gpu-check-results.md").read_text()
    assert "DRY RUN" in md and "## Against issue 13's targets" in md and "| TP8 |" in md
    assert (tmp_path / "gpu_check.log").exists()
