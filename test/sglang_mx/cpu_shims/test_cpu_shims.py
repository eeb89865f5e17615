"""The CPU stand-ins for sgl_kernel and torchvision import cleanly and fail loudly when called."""

from __future__ import annotations

import subprocess
import sys

from sglang_mx.seam.cpu_setup import SHIMS

CHECK = """
import sys
sys.path.insert(0, {shim!r})
import {pkg}
assert {pkg}.STANDIN
from {pkg}.{sub} import something
try:
    something(1)
except NotImplementedError as e:
    print("RAISED:", e)
"""


def run_check(pkg: str, sub: str) -> str:
    code = CHECK.format(shim=str(SHIMS[pkg]), pkg=pkg, sub=sub)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_sgl_kernel_standin_names_the_called_op():
    out = run_check("sgl_kernel", "kvcacheio")
    assert "RAISED: sgl_kernel.kvcacheio.something was called" in out
    assert "CPU stand-in" in out


def test_torchvision_standin_names_the_called_op():
    out = run_check("torchvision", "transforms")
    assert "RAISED: torchvision.transforms.something was called" in out
