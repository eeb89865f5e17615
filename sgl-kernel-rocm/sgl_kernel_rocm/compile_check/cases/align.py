"""Compile cases of the MoE's one-launch token alignment."""

from __future__ import annotations

from sgl_kernel_rocm.compile_check.cases.base import Case, Kernel

ALIGN = Kernel(
    "moe.align",
    "sgl_kernel_rocm.moe._align_kernel.moe_align_kernel",
    "ids_ptr:*i32 sorted_ids_ptr:*i32 block_expert_ptr:*i32 num_padded_ptr:*i32 counter_ptr:*i32 "
    "out_ptr:*bf16 shared_ptr:*bf16",
)


def align_cases(arch: str) -> list[Case]:
    """The one-launch token alignment of the MoE (moe/_align_kernel.py) at GLM-5.2's 256 experts
    with top-8, for the BLOCK_M values the tables use."""
    from sgl_kernel_rocm.moe.align import ALIGN_CHUNK, ALIGN_NUM_WARPS

    out = []
    for bm in (16, 32, 64):
        out.append(
            ALIGN.case(
                arch,
                f"E256_bm{bm}",
                {"num_warps": ALIGN_NUM_WARPS, "num_stages": 1},
                ints=(
                    ("n_slots", 520),
                    ("num_experts", 256),
                    ("capacity", 520 + 256 * (bm - 1)),
                    ("n_counters", 96 * 65),
                    ("top_k", 8),
                    ("hidden", 6144),
                    ("stride_out", 6144),
                    ("stride_shared", 6144),
                ),  # fmt: skip
                # As launched by the MoE: unrouted rows written too, with a shared output.
                constexprs=(
                    ("BLOCK_M", bm),
                    ("E_PAD", 256),
                    ("CHUNK", ALIGN_CHUNK),
                    ("K_PAD", 8),
                    ("BLOCK_H", 1024),
                    ("HAS_SHARED", True),
                ),
            )
        )
    return out
