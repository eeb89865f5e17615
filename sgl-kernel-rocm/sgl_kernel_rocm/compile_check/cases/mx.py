"""Compile case of the W4A4 activation quantizer."""

from __future__ import annotations

from sgl_kernel_rocm.compile_check.cases.base import Case, Kernel

QUANTIZE = Kernel(
    "mx.quantize_rows",
    "sgl_kernel_rocm._mx_triton._quantize_rows_kernel",
    "x_ptr:*bf16 q_ptr:*u8 s_ptr:*u8",
)


def quantize_cases(arch: str) -> list[Case]:
    """The W4A4 activation quantizer (mx.quantize_mxfp4_triton / the MoE's A4 input)."""
    return [
        QUANTIZE.case(
            arch,
            "bf16",
            {"num_warps": 4, "num_stages": 2},
            ints=(
                ("n_rows", 4099),
                ("n_cols", 6144),
                ("stride_x", 6144),
                ("stride_q", 3072),
                ("stride_s", 192),
            ),  # fmt: skip
            constexprs=(("BLOCK_R", 16), ("BLOCK_C", 256)),
        )
    ]
