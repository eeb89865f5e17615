"""`make fuzz` (scripts/fuzz.py) covers both bundled models: the default GLM-5 one exactly as
`sglang-mx serve` runs it, and the GLM-4.5 one, the time split evenly (its plan, no servers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sglang_mx.assets import bundled_model_path
from sglang_mx_lab.testing.server import default_serve_args

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "fuzz.py"


def _plan(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--seed", "1", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [ln.removeprefix("fuzz: plan: ") for ln in out.splitlines() if "plan:" in ln]


def test_make_fuzz_covers_both_models():
    model, args = default_serve_args()
    assert _plan("--minutes", "30") == [
        f"glm5-default: {model} {' '.join(args)}, 15 min",
        f"glm45-mxfp4: {bundled_model_path('mxfp4')} --enable-cache-report, 15 min",
    ]
    assert "tiny-glm5-quark" in model


def test_one_model_gets_the_whole_budget():
    [line] = _plan("--minutes", "4", "--models", "glm45-mxfp4")
    assert line.endswith(", 4 min")


def test_unknown_model_is_refused():
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--models", "glm6"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "unknown ['glm6']" in r.stderr, r.stderr
