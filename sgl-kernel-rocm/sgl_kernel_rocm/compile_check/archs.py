"""Per-arch facts of the compile gate (archs.json): Triton targets, budgets, ceiling figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_DATA = json.loads((Path(__file__).parent / "archs.json").read_text())
ARCHS: dict[str, dict[str, Any]] = {k: v for k, v in _DATA.items() if k != "_meta"}


def native_dot_scaled(arch: str) -> bool:
    from sgl_kernel_rocm.arch import has_native_dot_scaled

    return has_native_dot_scaled(arch)


def gpu_target(arch: str):
    from triton.backends.compiler import GPUTarget

    backend, name, warp = ARCHS[arch]["target"]
    return GPUTarget(backend, name, warp)


def is_amd(arch: str) -> bool:
    return ARCHS[arch]["target"][0] == "hip"
