"""Compile cases of the DSA lightning-indexer scoring kernel."""

from __future__ import annotations

from sgl_kernel_rocm.compile_check.cases.base import Case, Kernel, decode_configs, kv_type

INDEXER = Kernel(
    "attn.dsa_indexer",
    "sgl_kernel_rocm.attention._dsa_indexer_kernels._indexer_score_kernel",
    "Q:*bf16 W:*fp32 K:kv KS:*fp32 BT:*i32 SEQ:*i32 OUT:*fp32",
    stream="kv",
    expect=("convert_once",),
)
TOPK = Kernel(
    "attn.topk_radix",
    "sgl_kernel_rocm.attention._topk_radix_kernels._radix_topk_kernel",
    "S:*fp32 SEQ:*i32 OUT:*i32",
    stream="scores",
)


def indexer_cases(arch: str) -> list[Case]:
    """DSA lightning-indexer scoring: 32 heads x 128, FP8 index keys, page 64."""
    out = []
    for cfg in decode_configs("decode_dsa_indexer", arch):
        bn = int(cfg["BLOCK_N"])
        out.append(
            INDEXER.case(
                arch,
                "kfp8:h32_d128_p64",
                cfg,
                kv=kv_type(arch, "fp8")[0],
                ints=(
                    ("num_heads", 32),
                    ("tiles_per_prog", 20),
                    ("stride_qb", 32 * 128),
                    ("stride_qh", 128),
                    ("stride_wb", 32),
                    ("stride_kp", 64 * 128),
                    ("stride_kt", 128),
                    ("stride_ksp", 64),
                    ("stride_kst", 1),
                    ("stride_btb", 313),
                    ("stride_ob", 20000),
                ),  # fmt: skip
                constexprs=(
                    ("PAGE", 64),
                    ("D", 128),
                    ("BLOCK_HI", 32),
                    ("BLOCK_N", bn),
                    ("UPCAST", False),
                ),  # fmt: skip
                stream_bytes_per_iter=bn * 128,
            )
        )
    out.append(radix_topk_case(arch))
    return out


def radix_topk_case(arch: str) -> Case:
    """The indexer's radix top-k (attention/_topk_radix_kernels.py, launched as topk_radix.py
    does): one program per row of 20k fp32 scores, top-k 2,048."""
    from sgl_kernel_rocm.attention.topk_radix import BLOCK, NUM_WARPS

    launch = {"num_warps": NUM_WARPS, "num_stages": 1}
    return TOPK.case(arch, "fp32:k2048", launch,
        ints=(("length", 20000), ("k", 2048), ("stride_sb", 20000), ("stride_ob", 2048)),
        constexprs=(("BLOCK", BLOCK),), stream_bytes_per_iter=BLOCK * 4,
    )  # fmt: skip
