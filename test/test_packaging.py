"""Both wheels, built from this checkout and installed with every extra into a fresh venv that
already holds torch, triton and sglang, as an SGLang GPU image does: pip must add only our two
packages and leave those three exactly as they were (version, location, every file's RECORD hash);
SGLang must find our entry points there, and `sglang-mx info` must run.

The "image" is this suite's own environment seen through a symlink overlay: a folder on the fresh
venv's path holding links to every installed distribution except ours, so pip treats them as
installed outside its environment (it never uninstalls or rewrites those) and, with
`--no-index`, must satisfy every requirement from them or from the two wheels."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
IMAGE_PACKAGES = ("torch", "triton", "sglang")
EXTRAS = "provider,bench,router,cpu,dev"
OURS = ("sglang_mx", "sgl_kernel_rocm", "__editable__", "_sglang_mx", "_sgl_kernel_rocm")


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    env.update({"HF_HUB_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    r = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd}\n{(r.stdout + r.stderr)[-4000:]}"
    return r


def _copy_source(dst: Path) -> None:
    """The tracked files of this checkout (a clean tree to build from, nothing written here)."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for rel in filter(None, files):
        src = ROOT / rel.decode()
        if src.is_file():
            (dst / rel.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel.decode())


def _overlay(dst: Path) -> None:
    """Links to every installed distribution of this environment but ours (no .pth files: the
    fresh venv must not inherit our editable installs or stand-ins)."""
    site = Path(sysconfig.get_paths()["purelib"])
    dst.mkdir()
    for entry in site.iterdir():
        if entry.name.startswith(OURS) or entry.suffix == ".pth" or entry.name == "__pycache__":
            continue
        (dst / entry.name).symlink_to(entry)


SNAPSHOT = """
import base64, hashlib, importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1:]:
    dist = md.distribution(name)
    bad = 0
    for f in dist.files or []:
        if f.hash is None or f.hash.mode != "sha256" or str(f).startswith(".."):
            continue  # scripts in bin/ are outside the overlay; the package's files are not
        digest = hashlib.sha256(f.locate().read_bytes()).digest()
        bad += base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != f.hash.value
    record = dist.read_text("RECORD") or ""
    out[name] = {
        "version": dist.version,
        "location": str(dist.locate_file("")),
        "record_sha256": hashlib.sha256(record.encode()).hexdigest(),
        "files": len(dist.files or []),
        "files_not_matching_record": bad,
    }
print(json.dumps(out))
"""


def _snapshot(python: Path) -> dict:
    return json.loads(_run([python, "-c", SNAPSHOT, *IMAGE_PACKAGES], timeout=300).stdout)


LAB_IMPORT = re.compile(rb"^\s*(from|import)\s+sglang_mx_lab\b", re.M)


def wheel_problems(dist: Path) -> list[str]:
    """What a serving node must not get: test support, the planner's validation lab, the
    compile gate, or any module that imports the lab (issue 43)."""
    problems = []
    for whl in sorted(dist.glob("*.whl")):
        with zipfile.ZipFile(whl) as z:
            for name in z.namelist():
                if name.startswith(("sglang_mx_lab/", "sglang_mx/testing/")):
                    problems.append(f"{whl.name}: test support {name}")
                elif name.startswith("sgl_kernel_rocm/compile_check/"):
                    problems.append(f"{whl.name}: compile gate {name}")
                elif name.endswith(".py") and LAB_IMPORT.search(z.read(name)):
                    problems.append(f"{whl.name}: {name} imports sglang_mx_lab")
    return problems


def test_wheels_install_with_extras_into_an_sglang_image(tmp_path: Path) -> None:
    t0 = time.monotonic()
    src, dist, venv = tmp_path / "src", tmp_path / "dist", tmp_path / "venv"
    _copy_source(src)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    _run([*pip_wheel, "--no-index", "-w", dist, src / "sgl-kernel-rocm", src], timeout=300)
    wheels = sorted(p.name for p in dist.glob("*.whl"))
    assert [w.split("-")[0] for w in wheels] == ["sgl_kernel_rocm", "sglang_mx"], wheels
    assert wheel_problems(dist) == []
    built = time.monotonic()

    # No pip/setuptools of its own: an image's (the overlay's) are the ones in use, as there.
    _run([sys.executable, "-m", "venv", "--without-pip", venv], timeout=300)
    python = venv / "bin" / "python"
    fresh_site = Path(
        _run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    _overlay(tmp_path / "image")
    (fresh_site / "image.pth").write_text(f"{tmp_path / 'image'}\n")
    before = _snapshot(python)
    assert before["torch"]["version"].startswith("2.") and before["sglang"]["version"] == "0.5.23"

    sglang_mx_whl = next(dist.glob("sglang_mx-*.whl"))
    report = tmp_path / "report.json"
    _run(
        [python, "-m", "pip", "install", "--no-index", "--find-links", dist, "--report", report]
        + [f"sglang-mx[{EXTRAS}] @ {sglang_mx_whl.as_uri()}"],
        timeout=600,
    )
    installed = sorted(i["metadata"]["name"] for i in json.loads(report.read_text())["install"])
    # Every extra is satisfied by what the image holds: pip adds our two packages, nothing else.
    assert installed == ["sgl-kernel-rocm", "sglang-mx"], installed
    after = _snapshot(python)
    assert after == before
    for name in IMAGE_PACKAGES:
        assert not str(after[name]["location"]).startswith(str(venv)), name
        assert after[name]["files_not_matching_record"] == 0, name

    # SGLang discovers our entry points from the wheel install, and they load.
    check = (
        "import importlib.metadata as md, sglang_mx, sgl_kernel_rocm\n"
        "eps = {g: [e for e in md.entry_points(group=g) if e.value.startswith('sglang_mx')]"
        " for g in ('sglang.srt.plugins', 'sglang.srt.platforms')}\n"
        "assert len(eps['sglang.srt.plugins']) == 1, eps\n"
        "assert len(eps['sglang.srt.platforms']) == 2, eps\n"
        "assert all(callable(e.load()) for e in eps['sglang.srt.platforms'])\n"
        "assert callable(eps['sglang.srt.plugins'][0].load())\n"
        "print(sglang_mx.__file__, sgl_kernel_rocm.__file__)\n"
    )
    files = _run([python, "-c", check], cwd=tmp_path).stdout.split()
    assert all(f.startswith(str(fresh_site)) for f in files), files
    # This "image" is a CPU box: its torchvision / sgl_kernel are our stand-ins (docs/install.md).
    pth = _run([python, "-m", "sglang_mx.seam.venv_shims"], cwd=tmp_path).stdout.strip()
    assert Path(pth).parent == fresh_site
    info = json.loads(_run([venv / "bin" / "sglang-mx", "info", "--json"], cwd=tmp_path).stdout)
    assert info["versions"]["sglang-mx"] == "0.1.0" and info["versions"]["sglang"] == "0.5.23"
    assert "NOT registered" not in info["plugin"]["sglang.srt.plugins"]
    assert info["kernels"]["MXFP4 MoE experts (quant_method mxfp4/quark)"].startswith("torch ")
    assert info["kernels"]["MoE router (sigmoid + bias top-k)"].startswith("SGLang TopK.forward")
    rest = time.monotonic() - built
    print(f"wheels built in {built - t0:.1f} s, venv + install + checks {rest:.1f} s")


def test_wheel_check_sees_planted_lab_files(tmp_path: Path) -> None:
    """wheel_problems flags each thing it exists for, in a wheel built to hold them."""
    with zipfile.ZipFile(tmp_path / "sglang_mx-0-py3-none-any.whl", "w") as z:
        z.writestr("sglang_mx/plugin.py", "import torch\n")
        z.writestr("sglang_mx/testing/server.py", "x = 1\n")
        z.writestr(
            "sglang_mx/plan/cli.py", "def f():\n    from sglang_mx_lab.planner import knee\n"
        )
        z.writestr("sgl_kernel_rocm/compile_check/gate.py", "x = 1\n")
    found = wheel_problems(tmp_path)
    assert [p.split(": ")[1].split(" ")[0] for p in found] == [
        "test",
        "sglang_mx/plan/cli.py",
        "compile",
    ]
