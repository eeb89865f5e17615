"""SGLang's own entry points, run from this venv as a fresh shell has it (no PYTHONPATH tricks, no
variables of ours): they import and run, with our CPU stand-ins visible venv-wide only where the
real package is missing (`sglang_mx.seam.venv_shims`, written by scripts/setup.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from sglang_mx.seam.venv_shims import PTH_NAME, pth_line

VENV_BIN = Path(sys.executable).parent
HELP_ENTRY_POINTS = (
    "sglang.launch_server",
    "sglang.benchmark.serving",
    "sglang.bench_serving",
    "sglang.bench_one_batch_server",
)


def fresh_shell_env(**extra: str) -> dict[str, str]:
    """PATH with the venv first, HOME, offline hubs. A checkout that runs the suite from a worktree
    keeps its PYTHONPATH (source dirs only: never the stand-ins)."""
    env = {
        "PATH": f"{VENV_BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
        **extra,
    }
    if os.environ.get("PYTHONPATH"):
        assert "_cpu_shims" not in os.environ["PYTHONPATH"]
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def run(args: list[str], timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "python"), *args],
        env=fresh_shell_env(**env),
        cwd="/",
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_venv_has_the_standin_pth() -> None:
    pth = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    assert pth.is_file(), f"{pth} missing: run `make setup` (scripts/setup.sh writes it)"
    # The installed line names stand-in folders that exist (any checkout of this repo).
    text = pth.read_text()
    assert text.startswith("import sys;") and "torchvision_shim" in text
    assert text.count("_cpu_shims") == 2


def test_each_entry_point_help_from_a_fresh_shell() -> None:
    # All at once: each is a cold import of SGLang (6-12 s on 2 cores).
    procs = {
        m: subprocess.Popen(
            [str(VENV_BIN / "python"), "-m", m, "--help"],
            env=fresh_shell_env(),
            cwd="/",
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for m in HELP_ENTRY_POINTS
    }
    procs["sglang.check_env"] = subprocess.Popen(
        [str(VENV_BIN / "python"), "-m", "sglang.check_env"],
        env=fresh_shell_env(),
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for module, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{module}:\n{out[-3000:]}"
        if module == "sglang.check_env":
            assert "sglang: 0.5.23" in out and "PyTorch:" in out, out[-2000:]
        else:
            assert "usage:" in out and "ModuleNotFoundError" not in out, f"{module}:\n{out[-2000:]}"


def test_standins_import_venv_wide_and_raise_by_name() -> None:
    code = (
        "import torchvision, sgl_kernel\n"
        "assert torchvision.STANDIN and sgl_kernel.STANDIN\n"
        "from torchvision.transforms import functional as F\n"
        "try:\n    F.resize(1, 2)\nexcept NotImplementedError as e:\n    print('RAISED', e)\n"
    )
    r = run(["-c", code])
    assert r.returncode == 0, r.stderr
    assert "RAISED torchvision.transforms.functional.resize was called" in r.stdout


def test_a_real_package_wins_over_the_standin(tmp_path: Path) -> None:
    # A package of that name found anywhere on the path (here: a stand-in for a GPU image's real
    # torchvision) keeps the stand-in off sys.path entirely.
    real = tmp_path / "torchvision"
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    code = (
        "import sys, torchvision; "
        "print(torchvision.REAL, any('torchvision_shim' in p for p in sys.path))"
    )
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    }
    r = subprocess.run(
        [str(VENV_BIN / "python"), "-c", code],
        env={**fresh_shell_env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False"]
    assert "find_spec" in pth_line()


@pytest.mark.server
def test_sglang_benchmark_serving_against_the_server(mxfp4_server: str, tmp_path: Path) -> None:
    from sglang_mx.assets import bundled_model_path

    model = str(bundled_model_path("mxfp4"))
    out = tmp_path / "bench.jsonl"
    args = ["-m", "sglang.benchmark.serving", "--backend", "sglang", "--base-url", mxfp4_server]
    args += ["--dataset-name", "random-ids", "--num-prompts", "4", "--random-input-len", "32"]
    args += ["--random-output-len", "4", "--tokenizer", model, "--model", model]
    args += ["--output-file", str(out), "--seed", "1"]
    r = run(args)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    result = json.loads(out.read_text().splitlines()[-1])
    assert result["completed"] == 4 and result["total_output_tokens"] >= 4
    assert result["server_info"]["model_path"] == model
