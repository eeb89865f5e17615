"""The GPU serving check's record (scripts/gpu_serve_check.sh) against the CPU server on the same
prompts: greedy tokens equal, or first different only at a CPU near-tie, log-probs within
float32 noise (bounds derived in sglang_mx_lab.testing.serve_compare).

- docs/results/gpu-serve-sm90.json (an H200 run), whenever it is committed: compared with a live
  CPU server started with the record's own model and arguments, and its checks must all hold.
- docs/results/gpu-serve-cpu.json (the script's CPU dry run): the same comparison, so the
  machinery runs with no GPU record; a planted mismatch in it must be found.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
from sglang_mx.assets import bundled_model_path
from sglang_mx_lab.testing import serve_probe
from sglang_mx_lab.testing.serve_compare import compare, compare_answer, float32_tol
from sglang_mx_lab.testing.server import start_server

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "results"
DRY_RUN = RESULTS / "gpu-serve-cpu.json"
H200 = RESULTS / "gpu-serve-sm90.json"
# The bf16 model whose attention and indexer weights the tiny GLM-5 MXFP4 checkpoints share
# (only MLP/expert weights are quantized): G, the FP8 index-key effect, is measured on it.
SIBLING = {"tiny-glm5": "glm5-bf16"}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def dry_run() -> dict:
    assert DRY_RUN.is_file(), (
        f"{DRY_RUN} missing: run GPU_SERVE_DRY_RUN=1 scripts/gpu_serve_check.sh"
    )
    return load(DRY_RUN)


_tolerances: dict[tuple, tuple[float, float]] = {}


def tolerances(rec: dict) -> tuple[float, float]:
    """(TOL, TOL_long) for a record's model and long prompt (serve_compare's docstring)."""
    key = (rec["model"], tuple(rec["prompts"]["long"][0]))
    if key not in _tolerances:
        _tolerances[key] = _derive_tolerances(rec)
    return _tolerances[key]


def _derive_tolerances(rec: dict) -> tuple[float, float]:
    import torch
    from sglang_mx_lab.testing.dsa_selection import fp8_index_keys
    from sglang_mx_lab.testing.hf_reference import load_hf, token_logprobs

    config = json.loads((Path(bundled_model_path(rec["model"])) / "config.json").read_text())
    tol = float32_tol(config["num_hidden_layers"])
    sibling = next(v for k, v in SIBLING.items() if rec["model"].startswith(k))
    hf = load_hf(bundled_model_path(sibling))
    ids = rec["prompts"]["long"][0]
    with torch.no_grad():
        reference = token_logprobs(hf, ids)
        with fp8_index_keys():
            g = (token_logprobs(hf, ids) - reference).abs()
    return tol, 2 * float(g.mean()) + tol


_records: dict[tuple, dict] = {}


def cpu_record(rec: dict) -> dict:
    """The CPU server's record on `rec`'s prompts, model and arguments (one server per pair)."""
    key = (rec["model"], tuple(rec["server_args"]))
    if key not in _records:
        handle = start_server(bundled_model_path(rec["model"]), rec["server_args"])
        try:
            got = serve_probe.greedy_record(handle.base_url, rec["prompts"], timeout=600)
        finally:
            handle.stop(wait=False)
        assert not got["failures"], got["failures"]
        _records[key] = {"prompts": rec["prompts"], "greedy": got}
    return _records[key]


def test_bound_is_float32_noise_for_this_depth():
    # 4 layers x 6 reductions x sqrt(2048) x 2**-24 x 30, x4 (two sides, log-softmax)
    assert float32_tol(4) == pytest.approx(7.8e-3, rel=0.01)


def answer(ids: list[int], lps: list[float], tops: list[list[list]]) -> dict:
    return {"output_ids": ids, "logprobs": lps, "top": tops}


def test_near_tie_divergence_is_allowed_and_a_wide_one_is_not():
    tol = 1e-3
    cpu = answer([5, 6], [-0.1, -0.2], [[[5, -0.1], [9, -3.0]], [[6, -0.2], [7, -0.2015]]])
    near = answer([5, 7], [-0.1, -0.2], [[[5, -0.1]], [[7, -0.2]]])
    assert compare_answer("x", near, cpu, tol) == []  # margin 1.5e-3 <= 2 * tol
    wide = answer([9, 6], [-3.0, -0.2], [[[9, -3.0]], [[6, -0.2]]])
    assert "not a near-tie" in str(compare_answer("x", wide, cpu, tol)[0])
    unknown = answer([4, 6], [-0.1, -0.2], [[[4, -0.1]], [[6, -0.2]]])
    assert "not in the CPU's top" in str(compare_answer("x", unknown, cpu, tol)[0])
    shifted = answer([5, 6], [-0.1 + 5 * tol, -0.2], cpu["top"])
    assert "log-prob gap" in str(compare_answer("x", shifted, cpu, tol)[0])


@pytest.mark.server
def test_dry_run_record_matches_the_cpu_server(dry_run):
    assert dry_run["dry_run"] and not dry_run["failures"], dry_run["failures"]
    assert all(dry_run["checks"].values()), dry_run["checks"]
    tol, long_tol = tolerances(dry_run)
    found = compare(dry_run, cpu_record(dry_run), tol, long_tol)
    assert found == [], "\n".join(map(str, found))


@pytest.mark.server
def test_planted_mismatches_are_found(dry_run):
    tol, long_tol = tolerances(dry_run)
    cpu = cpu_record(dry_run)
    # A greedy token the CPU ranked last of its top log-probs (far from a tie) at step 3.
    planted = copy.deepcopy(dry_run)
    ans = planted["greedy"]["short"][1]
    ans["output_ids"][3] = int(cpu["greedy"]["short"][1]["top"][3][-1][0])
    found = compare(planted, cpu, tol, long_tol)
    assert [f.where for f in found] == ["short[1] step 3"], found
    # The same tokens with log-probs off by a few bounds.
    planted = copy.deepcopy(dry_run)
    planted["greedy"]["concurrent"][7]["logprobs"][0] += 3 * tol
    assert [f.where for f in compare(planted, cpu, tol, long_tol)] == ["concurrent[7] step 0"]
    # The long prompt's log-probs shifted past the FP8-selection bound.
    planted = copy.deepcopy(dry_run)
    lps = planted["greedy"]["long"][0]["prompt_logprobs"]
    planted["greedy"]["long"][0]["prompt_logprobs"] = [lps[0]] + [x - 2 * long_tol for x in lps[1:]]
    assert [f.where for f in compare(planted, cpu, tol, long_tol)] == ["long[0] prompt"]
    # A missing answer.
    planted = copy.deepcopy(dry_run)
    planted["greedy"]["repeat"][1] = None
    assert [f.where for f in compare(planted, cpu, tol, long_tol)] == ["repeat[1]"]


@pytest.mark.server
@pytest.mark.skipif(not H200.is_file(), reason=f"no H200 record committed ({H200.name})")
def test_h200_record_matches_the_cpu_server():
    gpu = load(H200)
    assert not gpu["dry_run"] and gpu["versions"]["arch"] == "sm90"
    assert not gpu["failures"], gpu["failures"]
    failed = [name for name, ok in gpu["checks"].items() if not ok]
    assert not failed, failed  # graphs used for decode, every request answered, cached tokens...
    tol, long_tol = tolerances(gpu)
    found = compare(gpu, cpu_record(gpu), tol, long_tol)
    assert found == [], "\n".join(map(str, found))


def script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_carried_site_gets_our_entry_points(tmp_path):
    import importlib.metadata as md

    script("gpu_serve_check").write_entry_points(tmp_path)
    (dist,) = md.distributions(path=[str(tmp_path)])
    eps = {(ep.group, ep.name): ep.value for ep in dist.entry_points}
    assert eps[("sglang.srt.platforms", "mx_cuda")] == "sglang_mx.seam.platform:activate_cuda"
    assert eps[("sglang.srt.plugins", "sglang_mx")] == "sglang_mx.seam.plugin:register"


def test_carried_set_list():
    rows = script("gpu_serve_assets").read_list()
    names = [r.name for r in rows]
    assert len(names) == len(set(names))
    carried = {r.name for r in rows if r.role == "carried"}
    assert "sglang" in carried and "xgrammar" in carried
    # The platform exists so SGLang runs without these: they are never carried.
    assert not carried & {"sgl-kernel", "sglang-kernel", "flashinfer-python", "torch"}
    shims = ROOT / "python" / "sglang_mx" / "_cpu_shims"
    for module, dist in (("IPython", "ipython"), ("soundfile", "soundfile")):
        assert next(r for r in rows if r.name == dist).role == "stand-in"
        assert (shims / f"{module.lower()}_shim" / module / "__init__.py").is_file()


def test_travel_set_fits_the_cap():
    """What goes to the device machine (tracked files + the carried archive, recorded by `build`
    in gpu_serve_wheels.txt) stays under the device tool's 64 MiB cap less the stated margin."""
    assets = script("gpu_serve_assets")
    archive = assets.read_archive()
    assert archive.size > 0 and len(archive.sha256) == 64, "run gpu_serve_assets.py build"
    assert assets.MARGIN_BYTES >= 3 * 2**19  # the margin issue 23 asks for: 1.5 MiB
    tracked = assets.tracked_bytes()
    assert assets.travel_problems(tracked, archive) == []
    # The check itself: the same tree with an archive the margin larger is refused.
    room = assets.CAP_BYTES - assets.MARGIN_BYTES - tracked - archive.size
    bigger = assets.Archive(archive.size + room + 1, archive.sha256)
    (problem,) = assets.travel_problems(tracked, bigger)
    assert "over 62.50 MiB" in problem


def test_trim_prunes_all_but_the_recorded_modules(tmp_path):
    """gpu_serve_trim.txt: every `keep` module lies under a `prune` prefix or in a `prune-flat`
    package and exists in SGLang 0.5.23 (the venv's, the same release the archive carries);
    pruning a tree removes the other module files there and keeps the recorded ones with their
    packages' __init__, and a `prune-flat` package's subpackages."""
    import sglang

    assets = script("gpu_serve_assets")
    rows = assets.read_prune()
    site = Path(sglang.__file__).parents[1]
    for name in rows["keep"]:
        under = any(name == p or name.startswith(p + ".") for p in rows["prune"])
        assert under or name.rpartition(".")[0] in rows["prune-flat"], name
        rel = Path(*name.split("."))
        assert (site / rel.with_suffix(".py")).is_file() or (site / rel).is_dir(), name
    for p in rows["prune"] + rows["prune-flat"]:
        rel = Path(*p.split("."))
        assert (site / rel).is_dir() or (site / rel.with_suffix(".py")).is_file(), p

    tree = ("a/__init__.py", "a/b/__init__.py", "a/b/kept.py", "a/b/gone.py", "a/c/x.py")
    tree += ("m/__init__.py", "m/one.py", "m/two.py", "m/sub/__init__.py", "m/sub/y.py")
    for rel in tree:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    rules = "prune a.b\nprune a.c\nprune-flat m\nkeep a.b.kept\nkeep m.one\n"
    (tmp_path / "trim.txt").write_text(rules)
    assert assets.prune_modules(tmp_path, tmp_path / "trim.txt") == 18
    left = sorted(str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*.py"))
    assert left == [
        "a/__init__.py", "a/b/__init__.py", "a/b/kept.py",
        "m/__init__.py", "m/one.py", "m/sub/__init__.py", "m/sub/y.py",
    ]  # fmt: skip


def test_records_are_stored_in_the_writer_format():
    """The committed records are what gpu_serve_check.py writes (compact values, one line per
    field): same content when read back, same bytes when rewritten."""
    dumps_record = script("gpu_serve_check").dumps_record
    for path in (DRY_RUN, H200):
        if path.is_file():
            rec = load(path)
            assert json.loads(dumps_record(rec)) == rec
            assert dumps_record(rec) == path.read_text(), f"{path}: rewrite it with dumps_record"
