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


def test_attention_profile_plans_issue_22s_shapes_in_five_minutes(tmp_path):
    """GPU_CHECK_PROFILE=attention: only decode attention, at the issue's Measure shapes (FP8
    latent, 8 and 64 heads, 4k-20k context, batch 1-128, top-k 2,048, the indexer's score kernel
    and its top-k timed apart), all of it inside the script's 300 s (check step 210 s, less the
    setup and report run.py keeps back), then the gpu tests picked by -k "decode or indexer"."""
    stub = tmp_path / "python_stub"
    stub.write_text('#!/usr/bin/env bash\necho stub "$@" "kinds=$GPU_CHECK_KINDS"\n')
    stub.chmod(0o755)
    env = _script_env(tmp_path / "out", PYTHON=str(stub), GPU_CHECK_PROFILE="attention",
                      GPU_CHECK_DRY_RUN="0")  # fmt: skip
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert "of 300s budget" in log and "== check (limit 210s" in log, log[-2000:]
    assert "--profile attention" in log and "sweep_moe.py" not in log, log[-2000:]
    assert "-k decode or indexer" in log, log[-2000:]
    kinds = set(log.split("kinds=", 1)[1].split()[0].split(","))
    full = [c for c in P.build_plan() if c.kind in kinds]
    assert {c.kind for c in full} == kinds == {
        "check_mla", "check_dsa", "check_indexer", "mla", "dsa", "indexer", "indexer_scores",
        "indexer_topk", "indexer_topk_radix"}  # fmt: skip
    attn = [c.params for c in full if c.kind in ("mla", "dsa")]
    assert {a["heads"] for a in attn} == {8, 64} and {a["top_k"] for a in attn} == {2048}
    assert {a["ctx"] for a in attn} == {4096, 8192, 20480}
    assert {a["batch"] for a in attn} == {1, 8, 32, 128}
    for kind in ("indexer_scores", "indexer_topk"):
        rows = {(c.params["batch"], c.params["ctx"]) for c in full if c.kind == kind}
        assert rows == {(b, ctx) for b in (1, 8, 32, 128) for ctx in (4096, 8192, 20480)}
    # The MLA tile variants, named as the kernel names them, beside the table's pick.
    from sgl_kernel_rocm.attention.mla_decode import TILE_VARIANTS

    variants = {c.params["variant"] for c in full if "variant" in c.params}
    assert variants and variants <= set(TILE_VARIANTS) - {"table"}
    assert {c.params["batch"] for c in full if c.kind == "indexer_topk_radix"} == {1, 32}
    kept, dropped = P.trim(full, 210 - 15 - 20)
    assert not dropped, [c.name for c in dropped]


def _script_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "OUT": str(tmp_path),
        "GPU_CHECK_DRY_RUN": "1",
        "PYTHON": sys.executable,
        "PYTHONPATH": f"{ROOT / 'python'}:{ROOT / 'sgl-kernel-rocm'}",
        **extra,
    }


@pytest.mark.parametrize("step_rc", [0, 1, 124])
def test_script_exit_status_follows_its_steps(tmp_path, step_rc):
    """A planted check step (PYTHON is a stub exiting with step_rc, as run.py does on a
    correctness mismatch, or as a timeout reads): the script exits non-zero exactly when it
    failed, and its summary names the step."""
    stub = tmp_path / "python_stub"
    stub.write_text(f'#!/usr/bin/env bash\necho stub "$@"\nexit {step_rc}\n')
    stub.chmod(0o755)
    env = _script_env(tmp_path / "out", PYTHON=str(stub), GPU_CHECK_STEPS="check")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert "stub benchmark/gpu_check/run.py" in log, log[-2000:]
    if step_rc == 0:
        assert proc.returncode == 0 and "all steps passed" in log, log[-2000:]
    else:
        status = "TIMEOUT" if step_rc == 124 else f"rc={step_rc}"
        assert proc.returncode == 1, log[-2000:]
        assert f"FAILED steps: check ({status})" in log, log[-2000:]


def test_moe_profile_runs_only_the_moe_and_its_variants(tmp_path):
    """GPU_CHECK_PROFILE=moe (issue 21's measurement): the check keeps the MoE kinds only, the
    variants step times code paths x word upcasts, all inside a 290 s budget."""
    stub = tmp_path / "python_stub"
    stub.write_text('#!/usr/bin/env bash\necho stub "$@" "kinds=$GPU_CHECK_KINDS"\n')
    stub.chmod(0o755)
    env = _script_env(tmp_path / "out", PYTHON=str(stub), GPU_CHECK_PROFILE="moe")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-2000:]
    assert "kinds=check_moe,check_moe_ep,moe,moe_nosplit,moe_bf16" in log, log[-2000:]
    assert "stub benchmark/gpu_check/sweep_moe.py --variants" in log, log[-2000:]
    assert "of 290s budget" in log
    bad = _script_env(tmp_path / "bad", PYTHON=str(stub), GPU_CHECK_PROFILE="attn")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=bad,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "GPU_CHECK_PROFILE must be" in proc.stderr


def test_run_keeps_only_the_kinds_asked_for():
    run = [sys.executable, str(ROOT / "benchmark" / "gpu_check" / "run.py"), "--plan-only",
           "--out", "/tmp/unused", "--budget-s", "290"]  # fmt: skip
    proc = subprocess.run([*run, "--kinds", "moe,moe_bf16"], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    planned = [ln for ln in proc.stdout.splitlines() if ln.startswith("  moe")]
    assert planned and not any(k in proc.stdout for k in ("mla:", "dsa:", "indexer:"))
    proc = subprocess.run([*run, "--kinds", "moe,mxa"], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "mxa" in proc.stdout


def test_masked_ep_routing_matches_sglang_dispatch():
    """The EP8 case maps global ids the way SGLang 0.5.23's StandardDispatcher does
    (_map_topk_ids_to_local_experts over its local_expert_mapping), -1 kept."""
    torch = pytest.importorskip("torch")
    from sglang.srt.layers.moe.token_dispatcher.standard import _map_topk_ids_to_local_experts

    sys.path.insert(0, str(ROOT / "benchmark" / "gpu_check"))
    try:
        spec = importlib.util.spec_from_file_location(
            "gpu_check_moe", ROOT / "benchmark" / "gpu_check" / "moe.py"
        )
        mo = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mo)
    finally:
        sys.path.remove(str(ROOT / "benchmark" / "gpu_check"))
        sys.modules.pop("plan", None)
    ids = torch.randint(-1, 256, (64, 8), dtype=torch.int32)
    for rank in (0, 3, 7):
        mapping = torch.full((256,), -1, dtype=torch.int32)
        mapping[rank * 32 : (rank + 1) * 32] = torch.arange(32, dtype=torch.int32)
        ours = mo.ep_local_ids(ids, rank, 32)
        assert torch.equal(ours, _map_topk_ids_to_local_experts(ids, mapping).to(torch.int32))


@pytest.mark.timeout(240)
def test_dry_run_writes_results(tmp_path):
    env = _script_env(tmp_path, GPU_CHECK_STEPS="check", GPU_CHECK_COMMIT="0123abc")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=230)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    report = json.loads((tmp_path / "docs" / "results" / "gpu-check-cpu.json").read_text())
    assert report["dry_run"] and report["plan"]["kept"] == len(report["rows"])
    # Every result names the code it ran on (the device copy has no .git: the env var wins).
    assert report["commit"] == "0123abc" and report["commit_source"] == "$GPU_CHECK_COMMIT"
    kinds = {r["kind"]: r for r in report["rows"]}
    for kind in ("check_moe", "check_moe_ep", "check_mla", "check_dsa", "check_indexer", "moe",
                 "moe_bf16", "mla", "dsa", "indexer", "indexer_scores",
                 "indexer_topk", "indexer_topk_radix"):  # fmt: skip
        assert kinds[kind]["status"] == "ok", kinds[kind]
    assert kinds["indexer_topk_radix"]["selection_ok"] is True
    assert {r.get("variant") for r in report["rows"] if r["kind"] == "mla"} > {None}
    assert kinds["moe"]["us"] > 0 and kinds["mla"]["us"] > 0
    # TFLOP/s on every attention row (interpreter times make it ~0 here; the key must be there).
    assert all(kinds[k]["tflops"] >= 0 for k in ("mla", "dsa", "indexer_scores"))
    assert kinds["moe_bf16"]["impl"] == "fused_moe_bf16" and kinds["moe_bf16"]["us"] > 0
    # EP8 with global ids: some tokens had no local expert, and their rows came back zero.
    ep = kinds["check_moe_ep"]
    assert 0 < ep["masked_tokens"] < ep["tokens"] and ep["masked_rows_zero"], ep
    md = (tmp_path / "docs" / "gpu-check-results.md").read_text()
    assert "DRY RUN" in md and "## Against issue 13's targets" in md and "| TP8 |" in md
    assert "commit `0123abc`" in md
    assert (tmp_path / "gpu_check.log").exists()


def test_issue_22_targets_read_only_the_shipped_tables_rows():
    """A tile-variant row (variant=...) is timed beside the table's pick but is not what ships:
    the targets table reads the table's rows only."""
    spec = importlib.util.spec_from_file_location(
        "gpu_check_run", ROOT / "benchmark" / "gpu_check" / "run.py"
    )
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    base = {"kind": "mla", "status": "ok", "heads": 8, "batch": 32, "ctx": 20480}
    rows = [{**base, "frac_copy": 0.5}, {**base, "frac_copy": 0.1, "variant": "keys_on_m"}]
    line = next(x for x in run._targets_22(rows) if x.startswith("| MLA, 8 heads"))
    assert "50% - 50%" in line, line
