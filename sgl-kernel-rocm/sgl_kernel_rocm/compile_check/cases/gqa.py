"""Compile cases of GQA split-KV decode attention."""

from __future__ import annotations

from sgl_kernel_rocm.compile_check.cases.base import Case, Kernel, decode_configs, kv_type

GQA = Kernel(
    "attn.gqa_decode",
    "sgl_kernel_rocm.attention._gqa_decode_kernels._gqa_decode_split_kernel",
    "Q:*bf16 K:kv V:kv BT:*i32 SEQ:*i32 KS:*fp32 VS:*fp32 O_PART:*fp32 LSE_PART:*fp32",
    stream="kv",
    expect=("convert_once",),
)


def gqa_cases(arch: str) -> list[Case]:
    # GLM-4.5 under TP8: 96 query / 8 KV heads -> 12 query heads per KV head per rank, D 128.
    group, d, page = 12, 128, 64
    out = []
    for cfg in decode_configs("decode_gqa", arch):
        for kv in ("bf16", "fp8"):
            kv_t, kv_b = kv_type(arch, kv)
            bn = int(cfg["BLOCK_N"])
            out.append(
                GQA.case(
                    arch,
                    f"kv{kv}:g{group}_d{d}_p{page}",
                    cfg,
                    kv=kv_t,
                    ints=(
                        ("seq_cap", 313 * page),
                        ("window", -1),
                        ("num_splits", 7),
                        ("stride_qb", 12 * d),
                        ("stride_qh", d),
                        ("stride_kp", page * d),
                        ("stride_kt", d),
                        ("stride_kh", d),
                        ("stride_vp", page * d),
                        ("stride_vt", d),
                        ("stride_vh", d),
                        ("stride_btb", 313),
                        ("stride_ob", 12 * 7 * d),
                        ("stride_oh", 7 * d),
                        ("stride_os", d),
                        ("stride_lb", 12 * 7),
                        ("stride_lh", 7),
                    ),  # fmt: skip
                    floats=("qk_scale_log2",),
                    constexprs=(
                        ("GROUP", group),
                        ("PAGE", page),
                        ("D", d),
                        ("DV", d),
                        ("BLOCK_H", 16),
                        ("BLOCK_D", d),
                        ("BLOCK_DV", d),
                        ("BLOCK_N", bn),
                        ("UPCAST", False),
                    ),  # fmt: skip
                    stream_bytes_per_iter=bn * 2 * d * kv_b,
                )
            )
    return out
