"""The compile matrix: every @triton.jit kernel of the package x arch x the configs its shipped
JSON tables (or heuristics) can select there x each code path, deduplicated.

A Case carries what `triton.compile` needs (signature, constexprs, which integer arguments the
JIT would specialize as divisible by 16 or equal to 1 at a realistic GLM shape) plus what the
gate and the ceiling need (the stream the main loop reads and its bytes per iteration).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgl_kernel_rocm.compile_check.archs import ARCHS

PKG = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    kernel: str  # short name, e.g. "moe.gate_up"
    module: str  # import path of the module holding the @triton.jit function
    fn: str
    arch: str
    label: str  # what varies: path, dtype, shape, config
    pointers: tuple[tuple[str, str], ...]  # (arg, "*bf16" ...)
    ints: tuple[tuple[str, int], ...]  # (arg, a realistic value) -> i32/i64, div-16, ==1
    floats: tuple[str, ...]  # fp32 scalar args
    constexprs: tuple[tuple[str, Any], ...]  # dtypes as strings "tl.bfloat16"
    num_warps: int
    num_stages: int
    stream: str  # the `# stream:` marker of the main loop's big load ("weights", "kv")
    stream_bytes_per_iter: int  # bytes of that stream one program loads per loop iteration
    # What the gate demands beyond building cleanly (gate.py): "wide_stream" (16-byte loads of
    # the stream), "whole_warps" (no warp repeats another's tile), "mfma_scale", "cvt_scalef32".
    expect: tuple[str, ...] = field(default=())

    @property
    def key(self) -> str:
        tiles = ",".join(f"{k}={v}" for k, v in self.constexprs if k.startswith("BLOCK"))
        return f"{self.kernel}|{self.arch}|{self.label}|{tiles}|w{self.num_warps}s{self.num_stages}"

    def specialization(self) -> tuple[tuple[str, str], ...]:
        """How Triton's JIT would specialize the integer args: ==1 becomes a constant, multiples
        of 16 get tt.divisibility 16, values past int32 are i64."""
        out = []
        for name, v in self.ints:
            tag = "one" if v == 1 else "d16" if v % 16 == 0 else "i64" if abs(v) >= 2**31 else ""
            out.append((name, tag))
        return tuple(out)

    def config(self) -> dict[str, Any]:
        return {k: v for k, v in self.constexprs if k.startswith("BLOCK")} | {
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
        }


def _table(op: str, arch: str) -> dict[str, Any] | None:
    path = PKG / "configs" / op / f"{arch}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _table_configs(op: str, arch: str, heuristic) -> list[tuple[str, dict]]:
    """(shape key, config) for every bucket the arch's table holds (DEFAULT included); the
    heuristic's configs when there is no table (that is what would launch)."""
    table = _table(op, arch)
    if table is None:
        return [("heuristic", heuristic(m)) for m in (1, 16, 64, 512, 4096)]
    out = []
    for key, buckets in table.items():
        if key == "_meta":
            continue
        out.extend((key, dict(cfg)) for cfg in buckets.values())
    return out


# --------------------------------------------------------------------------- fused MoE

_MOE_DEFAULT_SHAPE = (128, 4096, 1536)  # a shape no table names: what DEFAULT serves


def _moe_shape(key: str) -> tuple[int, int, int]:
    if key.startswith("DEFAULT") or key == "heuristic":
        return _MOE_DEFAULT_SHAPE
    e, h, i = key.split("_")[:3]
    return int(e[1:]), int(h[1:]), int(i[1:])


def moe_cases(arch: str, table: dict | None = None) -> list[Case]:
    """Cases of the arch's shipped MoE table, or of `table` (a candidate table) when given."""
    from sgl_kernel_rocm.moe.config import OP, choose_path, heuristic_config

    if table is None:
        pairs = _table_configs(OP, arch, heuristic_config)
    else:
        pairs = [(k, dict(c)) for k, b in table.items() if k != "_meta" for c in b.values()]
    out = []
    seen = set()
    for key, cfg in pairs:
        sig = (key, json.dumps(cfg, sort_keys=True))
        if sig in seen:
            continue
        seen.add(sig)
        experts, hidden, inter = _moe_shape(key)
        acts = ("mxfp4",) if key.endswith("_a4") else ("none",) if key.endswith("_a16") else (
            "none", "mxfp4")  # fmt: skip
        for act in acts:
            # The path production takes: bf16 activations, choose_path() per arch; the unpack
            # path in both upcast variants (scales checked at load: one multiply; else two).
            path = choose_path(arch, False, act_quant=act)
            # dot_scaled W4A16 likewise: the layout check turns on fast_math (no NaN scales).
            both = path == "unpack" or act == "none"
            for fast in (True, False) if both else (False,):
                out += _moe_pair(arch, cfg, experts, hidden, inter, act, path, key, fast)
    # The bf16-weight baseline (moe/bf16.py) on the tile it launches with (not part of a
    # candidate MXFP4 table's check).
    if table is None:
        from sgl_kernel_rocm.moe.bf16 import BF16_CONFIG

        out += _moe_pair(arch, BF16_CONFIG, 256, 6144, 256, "none", "bf16", "E256_H6144_I256_w16",
                         w16=True)  # fmt: skip
    return out


def _moe_pair(
    arch, cfg, experts, hidden, inter, act, path, key, fast=False, w16=False
) -> list[Case]:
    a4 = act == "mxfp4"
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    ce = {
        "BLOCK_M": bm,
        "BLOCK_N": bn,
        "BLOCK_K": bk,
        "A4": a4,
        "DOT_SCALED": path == "dot_scaled",
        "A_FMT": "e2m1" if a4 else "bf16",
        "DOT_DTYPE": "tl.bfloat16",
        "MANUAL_BF16_RNE": False,
        "WORDS": path == "unpack",
        "FULL_SCALE_RANGE": not fast,
        "W16": w16,
    }
    expect = ["wide_stream", "whole_warps"]
    if arch == "gfx950" and path == "dot_scaled":
        expect.append("mfma_scale" if a4 else "cvt_scalef32")
    variant = "+fastscale" if fast else ""
    wfmt = "w16a16" if w16 else "w4a4" if a4 else "w4a16"
    label = f"{wfmt}:{path}{variant}@{key}"
    if w16:
        ce["WORDS"] = False
    slots = 4096 + 3  # T x top_k of a mid-size batch; a runtime value, never 16-specialized
    routing = [
        ("sorted_ids_ptr", "*i32"),
        ("block_expert_ptr", "*i32"),
        ("num_padded_ptr", "*i32"),
    ]
    base = {
        "module": "sgl_kernel_rocm.moe._kernels",
        "arch": arch,
        "label": label,
        "floats": (),
        "num_warps": cfg["num_warps"],
        "num_stages": cfg["num_stages"],
        "stream": "weights",
        "expect": tuple(expect),
    }

    def gemm(prefix: str, rows: int, k: int) -> tuple[list, tuple]:
        """Pointers and ints of one MX GEMM: activations (plain, packed, scales) with K
        columns, and `rows` weight rows of K per expert."""
        ptrs = [(f"{prefix}_ptr", "*bf16"), (f"{prefix}q_ptr", "*u8"), (f"{prefix}s_ptr", "*u8"),
                ("w_ptr", "*u8"), ("ws_ptr", "*u8")]  # fmt: skip
        ints = ((f"stride_{prefix}", k), (f"stride_{prefix}q", k // 2),
                (f"stride_{prefix}s", k // 32), ("stride_we", rows * k // 2),
                ("stride_wn", k // 2), ("stride_wse", rows * k // 32),
                ("stride_wsn", k // 32))  # fmt: skip
        if w16:  # bf16 weights [E, rows, K]; the scale pointer is the weight tensor (unread)
            ptrs[3:] = [("w_ptr", "*bf16"), ("ws_ptr", "*bf16")]
            ints = (*ints[:3], ("stride_we", rows * k), ("stride_wn", k),
                    ("stride_wse", rows * k), ("stride_wsn", k))  # fmt: skip
        return ptrs, ints

    ptrs, ints = gemm("x", 2 * inter, hidden)
    gate = Case(
        kernel="moe.gate_up",
        fn="gate_up_swiglu_kernel",
        pointers=tuple(
            ptrs + [("out_ptr", "*bf16"), ("outq_ptr", "*u8"), ("outs_ptr", "*u8")] + routing
        ),  # fmt: skip
        ints=(
            ("n_slots", slots),
            ("top_k", 8),
            ("H", hidden),
            ("INTER", inter),
            *ints,
            ("stride_out", inter),
            ("stride_outq", inter // 2),
            ("stride_outs", inter // 32),
        ),  # fmt: skip
        constexprs=tuple((ce | {"EVEN_K": hidden % bk == 0}).items()),
        stream_bytes_per_iter=2 * (bn * bk * 2 if w16 else bn * bk // 2 + bn * bk // 32),
        **base,
    )
    ptrs, ints = gemm("a", hidden, inter)
    down = Case(
        kernel="moe.down",
        fn="down_kernel",
        pointers=tuple(ptrs + [("topk_w_ptr", "*fp32"), ("out_ptr", "*bf16")] + routing
                       + [("sum_ptr", "*bf16"), ("shared_ptr", "*bf16"), ("counter_ptr", "*i32"),
                          ("topk_ids_ptr", "*i32")]),  # fmt: skip
        ints=(("n_slots", slots), ("top_k", 8), ("H", hidden), ("INTER", inter), *ints,
              ("stride_out", hidden), ("stride_sum", hidden),
              ("stride_shared", hidden)),  # fmt: skip
        # As launched: the top-k sum folded in (with a shared-expert output), top-8.
        constexprs=tuple((ce | {"EVEN_K": inter % bk == 0, "FUSE_SUM": True,
                                "HAS_SHARED": True, "K_PAD": 8}).items()),  # fmt: skip
        stream_bytes_per_iter=bn * bk * 2 if w16 else bn * bk // 2 + bn * bk // 32,
        **base,
    )
    return [gate, down]


def quantize_cases(arch: str) -> list[Case]:
    """The W4A4 activation quantizer (mx.quantize_mxfp4_triton / the MoE's A4 input)."""
    return [
        Case(
            kernel="mx.quantize_rows",
            module="sgl_kernel_rocm._mx_triton",
            fn="_quantize_rows_kernel",
            arch=arch,
            label="bf16",
            pointers=(("x_ptr", "*bf16"), ("q_ptr", "*u8"), ("s_ptr", "*u8")),
            ints=(
                ("n_rows", 4099),
                ("n_cols", 6144),
                ("stride_x", 6144),
                ("stride_q", 3072),
                ("stride_s", 192),
            ),  # fmt: skip
            floats=(),
            constexprs=(("BLOCK_R", 16), ("BLOCK_C", 256)),
            num_warps=4,
            num_stages=2,
            stream="",
            stream_bytes_per_iter=0,
        )
    ]


def align_cases(arch: str) -> list[Case]:
    """The one-launch token alignment of the MoE (moe/_align_kernel.py) at GLM-5.2's 256 experts
    with top-8, for the BLOCK_M values the tables use."""
    from sgl_kernel_rocm.moe.align import ALIGN_CHUNK

    out = []
    for bm in (16, 32, 64):
        out.append(
            Case(
                kernel="moe.align",
                module="sgl_kernel_rocm.moe._align_kernel",
                fn="moe_align_kernel",
                arch=arch,
                label=f"E256_bm{bm}",
                pointers=(("ids_ptr", "*i32"), ("sorted_ids_ptr", "*i32"),
                          ("block_expert_ptr", "*i32"), ("num_padded_ptr", "*i32"),
                          ("counter_ptr", "*i32"), ("out_ptr", "*bf16"),
                          ("shared_ptr", "*bf16")),  # fmt: skip
                ints=(("n_slots", 520), ("num_experts", 256),
                      ("capacity", 520 + 256 * (bm - 1)), ("n_counters", 96 * 65),
                      ("top_k", 8), ("hidden", 6144), ("stride_out", 6144),
                      ("stride_shared", 6144)),  # fmt: skip
                floats=(),
                # As launched by the MoE: unrouted rows written too, with a shared output.
                constexprs=(("BLOCK_M", bm), ("E_PAD", 256), ("CHUNK", ALIGN_CHUNK),
                            ("K_PAD", 8), ("BLOCK_H", 1024), ("HAS_SHARED", True)),
                num_warps=4,
                num_stages=1,
                stream="",
                stream_bytes_per_iter=0,
            )
        )
    return out


# --------------------------------------------------------------------------- decode attention


def _decode_configs(op: str, arch: str) -> list[dict]:
    from sgl_kernel_rocm.attention._common import gpu_decode_heuristic

    seen, out = set(), []
    for _, cfg in _table_configs(op, arch, gpu_decode_heuristic):
        sig = json.dumps(cfg, sort_keys=True)
        if sig not in seen:
            seen.add(sig)
            out.append(cfg)
    return out


_KV = {"bf16": ("*bf16", 2), "fp8": ("*fp8e4nv", 1)}


def _kv(arch: str, kv: str) -> tuple[str, int]:
    """KV element type: CDNA3 (gfx942) FP8 is the FNUZ e4m3 (torch.float8_e4m3fnuz), OCP e4m3
    elsewhere; a gfx942 cache in OCP e4m3 would need instructions CDNA3 lacks."""
    if kv == "fp8" and arch == "gfx942":
        return "*fp8e4b8", 1
    return _KV[kv]


def gqa_cases(arch: str) -> list[Case]:
    # GLM-4.5 under TP8: 96 query / 8 KV heads -> 12 query heads per KV head per rank, D 128.
    group, d, page = 12, 128, 64
    out = []
    for cfg in _decode_configs("decode_gqa", arch):
        for kv in ("bf16", "fp8"):
            kv_t, kv_b = _kv(arch, kv)
            bn = int(cfg["BLOCK_N"])
            out.append(
                Case(
                    kernel="attn.gqa_decode",
                    module="sgl_kernel_rocm.attention.gqa_decode",
                    fn="_gqa_decode_split_kernel",
                    arch=arch,
                    label=f"kv{kv}:g{group}_d{d}_p{page}",
                    pointers=(
                        ("Q", "*bf16"),
                        ("K", kv_t),
                        ("V", kv_t),
                        ("BT", "*i32"),
                        ("SEQ", "*i32"),
                        ("KS", "*fp32"),
                        ("VS", "*fp32"),
                        ("O_PART", "*fp32"),
                        ("LSE_PART", "*fp32"),
                    ),  # fmt: skip
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
                    num_warps=int(cfg["num_warps"]),
                    num_stages=int(cfg["num_stages"]),
                    stream="kv",
                    stream_bytes_per_iter=bn * 2 * d * kv_b,
                )
            )
    return out


MLA_HEADS = (8, 64)  # GLM-5.2 heads per rank: TP8 (64 / 8) and DP attention (all 64)


def mla_cases(arch: str) -> list[Case]:
    """Dense MLA and DSA sparse decode (same kernel): GLM-5.2 latent 512 + rope 64, page 64;
    8 heads per rank under TP8 and 64 under DP attention, BLOCK_H as the wrapper picks it."""
    from sgl_kernel_rocm.attention.mla_decode import mla_block_h

    out = []
    for op, sparse in (("decode_mla", False), ("decode_dsa", True)):
        for heads, kv, cfg in _mla_configs(op, arch):
            block_h = mla_block_h(cfg, heads)
            kv_t, kv_b = _kv(arch, kv)
            bn = int(cfg["BLOCK_N"])
            out.append(_mla_case(arch, op, sparse, cfg, heads, block_h, kv, kv_t, kv_b, bn))
    return out


def _mla_configs(op: str, arch: str) -> list[tuple[int, str, dict]]:
    """(heads, kv, config) the wrapper can launch: a `h{H}_d576_kv{16,fp8}` entry serves only
    that head count and cache dtype, DEFAULT (or the heuristic) every other one."""
    from sgl_kernel_rocm.attention._common import gpu_decode_heuristic

    table = _table(op, arch)
    if table is None:
        return [(h, kv, gpu_decode_heuristic(1)) for h in MLA_HEADS for kv in ("bf16", "fp8")]
    named = {}
    for key in table:
        if key.startswith("h") and "_d576_kv" in key:
            heads = int(key[1:].split("_")[0])
            named[(heads, "fp8" if key.endswith("fp8") else "bf16")] = key
    seen, out = set(), []
    for heads in MLA_HEADS:
        for kv in ("bf16", "fp8"):
            key = named.get((heads, kv), "DEFAULT")
            for cfg in table[key].values():
                sig = json.dumps([heads, kv, cfg], sort_keys=True)
                if sig not in seen:
                    seen.add(sig)
                    out.append((heads, kv, dict(cfg)))
    return out


def _mla_case(arch, op, sparse, cfg, heads, block_h, kv, kv_t, kv_b, bn) -> Case:
    d = 576
    # Every head block re-reads the latent tile: count only the unique bytes (a program holding
    # all heads reads each once; 16-head blocks of 64 heads would read it 4 times).
    head_blocks = -(-heads // block_h)
    return Case(
        kernel="attn.dsa_decode" if sparse else "attn.mla_decode",
        module="sgl_kernel_rocm.attention.mla_decode",
        fn="_mla_decode_split_kernel",
        arch=arch,
        label=f"kv{kv}:h{heads}_bh{block_h}_p64",
        pointers=(
            ("Q", "*bf16"),
            ("KV", kv_t),
            ("BT", "*i32"),
            ("SEQ", "*i32"),
            ("IDX", "*i32"),
            ("O_PART", "*fp32"),
            ("LSE_PART", "*fp32"),
            ("KV_SCALE", "*fp32"),
        ),  # fmt: skip
        ints=(
            ("seq_cap", 313 * 64),
            ("num_heads", heads),
            ("num_idx", 2048),
            ("num_splits", 7),
            ("stride_qb", heads * d),
            ("stride_qh", d),
            ("stride_kvp", 64 * d),
            ("stride_kvt", d),
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
            ("UPCAST", False),
        ),  # fmt: skip
        num_warps=int(cfg["num_warps"]),
        num_stages=int(cfg["num_stages"]),
        stream="kv",
        stream_bytes_per_iter=bn * d * kv_b // head_blocks,
    )


def indexer_cases(arch: str) -> list[Case]:
    """DSA lightning-indexer scoring: 32 heads x 128, FP8 index keys, page 64."""
    out = []
    for cfg in _decode_configs("decode_dsa_indexer", arch):
        bn = int(cfg["BLOCK_N"])
        out.append(
            Case(
                kernel="attn.dsa_indexer",
                module="sgl_kernel_rocm.attention.dsa_indexer",
                fn="_indexer_score_kernel",
                arch=arch,
                label="kfp8:h32_d128_p64",
                pointers=(
                    ("Q", "*bf16"),
                    ("W", "*fp32"),
                    ("K", _kv(arch, "fp8")[0]),
                    ("KS", "*fp32"),
                    ("BT", "*i32"),
                    ("SEQ", "*i32"),
                    ("OUT", "*fp32"),
                ),  # fmt: skip
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
                floats=(),
                constexprs=(
                    ("PAGE", 64),
                    ("D", 128),
                    ("BLOCK_HI", 32),
                    ("BLOCK_N", bn),
                    ("UPCAST", False),
                ),  # fmt: skip
                num_warps=int(cfg["num_warps"]),
                num_stages=int(cfg["num_stages"]),
                stream="kv",
                stream_bytes_per_iter=bn * 128,
            )
        )
    return out


def reduce_cases(arch: str) -> list[Case]:
    out = []
    for dv in (128, 512):
        out.append(
            Case(
                kernel="attn.merge_splits",
                module="sgl_kernel_rocm.attention.reduce",
                fn="_merge_splits_kernel",
                arch=arch,
                label=f"dv{dv}",
                pointers=(
                    ("O_PART", "*fp32"),
                    ("LSE_PART", "*fp32"),
                    ("OUT", "*bf16"),
                    ("LSE_OUT", "*fp32"),
                ),  # fmt: skip
                ints=(
                    ("stride_pr", 7 * dv),
                    ("stride_ps", dv),
                    ("stride_lr", 7),
                    ("stride_or", dv),
                    ("num_splits", 7),
                ),  # fmt: skip
                floats=(),
                constexprs=(
                    ("DV", dv),
                    ("BLOCK_S", 8),
                    ("BLOCK_DV", dv),
                    ("WRITE_LSE", True),
                ),  # fmt: skip
                num_warps=4,
                num_stages=2,
                stream="",
                stream_bytes_per_iter=0,
            )
        )
    return out


FAMILIES = {
    "moe": moe_cases,
    "align": align_cases,
    "mx": quantize_cases,
    "gqa": gqa_cases,
    "mla": mla_cases,
    "indexer": indexer_cases,
    "reduce": reduce_cases,
}


def dedupe(cases: Iterable[Case]) -> list[Case]:
    """One case per distinct compile (kernel, arch, path, constexprs, specialization, launch)."""
    seen: dict[str, Case] = {}
    for case in cases:
        sig = json.dumps(
            [case.kernel, case.arch, case.label.split("@")[0], case.constexprs,
             case.specialization(), case.num_warps, case.num_stages],
            default=str,
        )  # fmt: skip
        seen.setdefault(sig, case)
    return list(seen.values())


def all_cases(archs=None, families=None) -> list[Case]:
    """The deduplicated matrix, in a stable order."""
    out = []
    for arch in archs or list(ARCHS):
        for name, make in FAMILIES.items():
            if not families or name in families:
                out += make(arch)
    return dedupe(out)
