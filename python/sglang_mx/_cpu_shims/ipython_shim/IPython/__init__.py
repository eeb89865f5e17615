"""sglang_mx's stand-in for IPython, carried to GPU machines whose image lacks it (see
../../README.md). SGLang 0.5.23's `sglang/utils.py` imports `IPython.display` at module level
for notebook helpers that serving never calls; the real package and its dependencies cost ~3 MB
of the carried set."""

from __future__ import annotations

import sys

from sglang_mx._cpu_shims.standin import install

STANDIN = True
install(
    sys.modules[__name__],
    ["display", "core", "core.display"],
    why="IPython here is sglang_mx's stand-in (python/sglang_mx/_cpu_shims): notebook display "
    "helpers are not available on this machine.",
)
