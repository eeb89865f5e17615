"""Make a process ready for SGLang 0.5.23 on the `mx_cuda` platform (a CUDA GPU without
`sgl_kernel`), before its model code imports.

On CUDA, SGLang's layer modules import names from `sgl_kernel` at import time (`if _is_cuda:`
blocks); the platform sends the calls elsewhere, but the imports must resolve, so our stand-in
goes on the path where the real package is missing (a call that still reaches it raises an error
naming the op). The radix tree runs on SGLang's Python TreeCore: its Rust TreeCore is a compiled
extension built for SGLang's pinned torch, not carried to GPU machines without SGLang.
"""

from __future__ import annotations

import os

from sglang_mx.seam.cpu_setup import add_standin

TREE_CORE_ENV = "SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND"


def prepare_process() -> None:
    os.environ.setdefault(TREE_CORE_ENV, "python")
    # As on the CPU platform: no torch.compile of SGLang's helpers (the MoE router compiled at the
    # first request, a stall of a short GPU lease), the same eager code on both platforms.
    os.environ.setdefault("TORCH_COMPILE_DISABLE", "1")
    add_standin("sgl_kernel")
