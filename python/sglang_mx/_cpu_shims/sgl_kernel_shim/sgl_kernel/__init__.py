"""sglang_mx's stand-in for the CUDA `sgl_kernel` package (CPU boxes only; see ../../README.md)."""

from __future__ import annotations

import sys

from sglang_mx._cpu_shims.spec_ops import OPS
from sglang_mx._cpu_shims.standin import install

STANDIN = True
install(
    sys.modules[__name__],
    [
        "kvcacheio",
        "flash_attn",
        "scalar_type",
        "quantization",
        "elementwise",
        "utils",
        "speculative",
        "mamba",
        "allreduce",
        "top_k",
        "sampling",
        "moe",
        "gemm",
        "attention",
    ],
    why=(
        "sgl_kernel here is sglang_mx's CPU stand-in (python/sglang_mx/_cpu_shims): this op has "
        "no implementation on this machine. Run a path that uses forward_native, or install the "
        "real sgl_kernel on a GPU node."
    ),
)
# EAGLE (MTP) speculative decoding's CPU index ops: real torch versions (spec_ops.py).
globals().update(OPS)
