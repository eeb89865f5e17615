"""Compile cases of MLA and DSA sparse decode (one kernel) at GLM-5.2's latent shape."""

from __future__ import annotations

import dataclasses
import json

from sgl_kernel_rocm.compile_check.cases.base import Case, Kernel, kv_type, table

MLA_HEADS = (8, 64)  # GLM-5.2 heads per rank: TP8 (64 / 8) and DP attention (all 64)
KV_KINDS = ("bf16", "fp8", "fp8packed")  # plain bf16 / FP8 rows, SGLang's packed FP8 rows
# Dense MLA and DSA sparse decode: one kernel, two names in the matrix.
MLA = Kernel(
    "attn.mla_decode",
    "sgl_kernel_rocm.attention._mla_decode_kernels._mla_decode_split_kernel",
    "Q:*bf16 KV:kv BT:*i32 SEQ:*i32 IDX:*i32 O_PART:*fp32 LSE_PART:*fp32 KV_SCALE:*fp32",
    stream="kv",
    expect=("convert_once",),
)
DSA = dataclasses.replace(MLA, name="attn.dsa_decode")


def mla_cases(arch: str) -> list[Case]:
    """Dense MLA and DSA sparse decode (same kernel): GLM-5.2 latent 512 + rope 64, page 64;
    8 heads per rank under TP8 and 64 under DP attention, BLOCK_H as the wrapper picks it.
    Besides bf16 and plain FP8 rows, SGLang's packed FP8 rows (latent_layout.py: 656 bytes,
    FP8 latent + an fp32 scale per 128 + bf16 rope), under their own table key."""
    from sgl_kernel_rocm.attention.mla_decode import mla_block_h

    out = []
    for op, sparse in (("decode_mla", False), ("decode_dsa", True)):
        for heads, kv, cfg in mla_configs(op, arch):
            block_h = mla_block_h(cfg, heads)
            kv_t, kv_b = kv_type(arch, kv)
            bn = int(cfg["BLOCK_N"])
            out.append(mla_case(arch, op, sparse, cfg, heads, block_h, kv, kv_t, kv_b, bn))
    return out


def mla_configs(op: str, arch: str) -> list[tuple[int, str, dict]]:
    """(heads, kv, config) the wrapper can launch: a `h{H}_d576_kv{16,fp8,fp8packed}` entry
    serves only that head count and cache layout, DEFAULT (or the heuristic) every other one."""
    from sgl_kernel_rocm.attention._common import gpu_decode_heuristic

    shipped = table(op, arch)
    if shipped is None:
        return [(h, kv, gpu_decode_heuristic(1)) for h in MLA_HEADS for kv in KV_KINDS]
    tags = {"16": "bf16", "fp8": "fp8", "fp8packed": "fp8packed"}
    named = {}
    for key in shipped:
        if key.startswith("h") and "_d576_kv" in key:
            heads = int(key[1:].split("_")[0])
            named[(heads, tags[key.split("_kv")[-1]])] = key
    seen, out = set(), []
    for heads in MLA_HEADS:
        for kv in KV_KINDS:
            key = named.get((heads, kv), "DEFAULT")
            for cfg in shipped[key].values():
                sig = json.dumps([heads, kv, cfg], sort_keys=True)
                if sig not in seen:
                    seen.add(sig)
                    out.append((heads, kv, dict(cfg)))
    return out


def latent_layout(kv: str):
    """The cache's row layout for a case's KV kind (latent_layout.py): "fp8packed" is SGLang's
    packed FP8 row, the others plain rows."""
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout

    return LatentLayout.packed_fp8() if kv == "fp8packed" else LatentLayout.plain()


def latent_constexprs(arch: str, kv_t: str, kv: str = "") -> dict:
    """The kernel's layout and FP8 bit-move constexprs for a case's arch, KV type and kind, as
    the wrapper passes them (LatentLayout.kernel_constexprs, fp8_bits.py)."""
    import torch

    from sgl_kernel_rocm.compile_check.archs import is_amd

    dtypes = {"*fp8e4nv": torch.float8_e4m3fn, "*fp8e4b8": torch.float8_e4m3fnuz,
              "*u8": torch.uint8}  # fmt: skip
    cache = torch.empty(0, dtype=dtypes.get(kv_t, torch.bfloat16))
    return latent_layout(kv).kernel_constexprs(cache, "amdgcn" if is_amd(arch) else "ptx")


def tile_variant(cfg: dict) -> str:
    """Label suffix of the kernel's tile variants (mla_decode.py): "+keys_on_m", "+prefetch"."""
    return "".join(f"+{k.lower()}" for k in ("KEYS_ON_M", "PREFETCH") if cfg.get(k))


def mla_case(arch, op, sparse, cfg, heads, block_h, kv, kv_t, kv_b, bn) -> Case:
    """One case; `kv_b` is bytes per element of the cache (1 for packed rows, whose width is
    the layout's row in bytes)."""
    d = 576
    row = latent_layout(kv).row_width  # cache row width in elements of kv_t
    # Every head block re-reads the latent tile: count only the unique bytes (a program holding
    # all heads reads each once; 16-head blocks of 64 heads would read it 4 times).
    head_blocks = -(-heads // block_h)
    return (DSA if sparse else MLA).case(
        arch,
        f"kv{kv}:h{heads}_bh{block_h}_p64{tile_variant(cfg)}",
        cfg,
        kv=kv_t,
        ints=(
            ("seq_cap", 313 * 64),
            ("num_heads", heads),
            ("num_idx", 2048),
            ("num_splits", 7),
            ("stride_qb", heads * d),
            ("stride_qh", d),
            ("stride_kvp", 64 * row),
            ("stride_kvt", row),
            ("stride_btb", 313),
            ("stride_ib", 2048),
            ("stride_ob", heads * 7 * 512),
            ("stride_oh", 7 * 512),
            ("stride_os", 512),
            ("stride_lb", heads * 7),
            ("stride_lh", 7),
        ),  # fmt: skip
        floats=("qk_scale_log2",),
        constexprs=(
            ("PAGE", 64),
            ("D_LAT", 512),
            ("D_ROPE", 64),
            ("BLOCK_H", block_h),
            ("BLOCK_N", bn),
            ("SPARSE", sparse),
            *latent_constexprs(arch, kv_t, kv).items(),
            ("UPCAST", False),
            ("KEYS_ON_M", bool(cfg.get("KEYS_ON_M", False))),
            ("PREFETCH", bool(cfg.get("PREFETCH", False))),
        ),  # fmt: skip
        stream_bytes_per_iter=bn * row * kv_b // head_blocks,
    )
