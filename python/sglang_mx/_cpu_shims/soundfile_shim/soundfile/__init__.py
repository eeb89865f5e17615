"""sglang_mx's stand-in for soundfile, carried to GPU machines whose image lacks it (see
../../README.md). SGLang 0.5.23 imports it for audio warm-up and transcription only; the real
package bundles libsndfile (~1 MB of the carried set)."""

from __future__ import annotations

import sys

from sglang_mx._cpu_shims.standin import install

STANDIN = True
install(
    sys.modules[__name__],
    [],
    why="soundfile here is sglang_mx's stand-in (python/sglang_mx/_cpu_shims): audio I/O is not "
    "available on this machine.",
)
