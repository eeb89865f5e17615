"""sgl_kernel_rocm: Triton kernels for MXFP4 MoE and paged decode attention, tuned per GPU arch.

Each kernel lives beside its torch reference; tuned launch configs are JSON data under configs/,
resolved by `sgl_kernel_rocm.tuning.get_config`.
"""

from __future__ import annotations

__version__ = "0.1.0"
