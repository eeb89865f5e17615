"""Compile cases of the split-KV merge."""

from __future__ import annotations

from sgl_kernel_rocm.compile_check.cases.base import Case, Kernel

MERGE = Kernel(
    "attn.merge_splits",
    "sgl_kernel_rocm.attention._reduce_kernels._merge_splits_kernel",
    "O_PART:*fp32 LSE_PART:*fp32 OUT:*bf16 LSE_OUT:*fp32",
)


def reduce_cases(arch: str) -> list[Case]:
    out = []
    for dv in (128, 512):
        out.append(
            MERGE.case(
                arch,
                f"dv{dv}",
                {"num_warps": 4, "num_stages": 2},
                ints=(
                    ("stride_pb", 64 * 7 * dv),
                    ("stride_ph", 7 * dv),
                    ("stride_ps", dv),
                    ("stride_lb", 64 * 7),
                    ("stride_lh", 7),
                    ("stride_ob", 64 * dv),
                    ("stride_oh", dv),
                    ("stride_xb", 64),
                    ("stride_xh", 1),
                    ("num_splits", 7),
                ),  # fmt: skip
                constexprs=(
                    ("DV", dv),
                    ("BLOCK_S", 8),
                    ("BLOCK_DV", dv),
                    ("WRITE_LSE", True),
                ),  # fmt: skip
            )
        )
    return out
