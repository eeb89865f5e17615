"""sglang_mx's stand-in for `torchvision` (CPU boxes only; see ../../README.md)."""

from __future__ import annotations

import sys

from sglang_mx._cpu_shims.standin import install

STANDIN = True
__version__ = "0.0.0+sglang_mx_standin"
install(
    sys.modules[__name__],
    [
        "transforms",
        "transforms.functional",
        "transforms.v2",
        "transforms.v2.functional",
        "io",
        "ops",
        "datasets",
        "models",
        "utils",
    ],
    why=(
        "torchvision here is sglang_mx's CPU stand-in (python/sglang_mx/_cpu_shims): image "
        "models are not supported on this CPU setup (no CPU torchvision wheel fits torch 2.13)."
    ),
)
