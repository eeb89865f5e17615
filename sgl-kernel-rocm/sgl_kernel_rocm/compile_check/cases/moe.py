"""Compile cases of the fused MXFP4 MoE (gate_up + SwiGLU, down): every config of the arch's
table x activation format x code path, plus the bf16-weight baseline, sm90's `dot_scaled`
W4A16 (measured on the H200 beside the unpack path production takes there) and gfx950's unpack
path with its inline-assembly upcast. The unpack path takes the arch's word upcast
(`moe.config.choose_upcast`: inline PTX on sm90/sm100, pure Triton on gfx942)."""

from __future__ import annotations

import json

from sgl_kernel_rocm.compile_check.cases.base import Case, build, table_configs

SM90_DOT_SCALED_MEASURED = (
    ((256, 6144, 256), {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128, "num_warps": 4,
                        "num_stages": 1}),
    ((32, 6144, 2048), {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4,
                        "num_stages": 1}),
)  # fmt: skip
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
        pairs = table_configs(OP, arch, heuristic_config)
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
                out += moe_pair(arch, cfg, experts, hidden, inter, act, path, key, fast)
            # gfx950's unpack path (`path="unpack"`): the hardware-convert word upcast
            # (moe/_upcast.py), the alternative to dot_scaled's upcast a GPU run can compare.
            if table is None and arch == "gfx950" and act == "none":
                out += moe_pair(arch, cfg, experts, hidden, inter, act, "unpack", key, True)
    # Hopper's dot_scaled W4A16 (a software upcast Triton emits; not what sm90 launches) at the
    # tiles the H200 measured it with, where it beat the unpack path (docs/kernels-moe.md), so
    # the cost model can rank the two paths on compiled code.
    if table is None and arch == "sm90":
        for (experts, hidden, inter), cfg in SM90_DOT_SCALED_MEASURED:
            key = f"E{experts}_H{hidden}_I{inter}_a16"
            for fast in (True, False):
                out += moe_pair(arch, cfg, experts, hidden, inter, "none", "dot_scaled", key, fast)
    # The bf16-weight baseline (moe/bf16.py) on the tile it launches with (not part of a
    # candidate MXFP4 table's check).
    if table is None:
        from sgl_kernel_rocm.moe.bf16 import BF16_CONFIG

        out += moe_pair(arch, BF16_CONFIG, 256, 6144, 256, "none", "bf16", "E256_H6144_I256_w16",
                         w16=True)  # fmt: skip
    return out


def moe_pair(
    arch, cfg, experts, hidden, inter, act, path, key, fast=False, w16=False
) -> list[Case]:
    from sgl_kernel_rocm.moe.config import choose_upcast, down_config, swap_ab_of

    dcfg = down_config(cfg)  # the down GEMM's own tile, when the config names one
    cfg = {k: v for k, v in cfg.items() if k != "down"}
    a4 = act == "mxfp4"
    upcast = choose_upcast(arch, cfg) if path == "unpack" and not w16 else "triton"
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
        "UPCAST": upcast,
        "SWAP_AB": swap_ab_of(cfg),
    }
    expect = ["wide_stream", "whole_warps"]
    if arch == "gfx950" and path == "dot_scaled":
        expect.append("mfma_scale" if a4 else "cvt_scalef32")
    # The inline-assembly upcasts (moe/_upcast.py) must show their instruction.
    if upcast == "gfx950":
        expect.append("cvt_scalef32")
    elif upcast == "ptx":
        expect.append("bf16x2_mul")
    sk_gate, sk_down = cfg.get("SPLIT_K", 1), cfg.get("SPLIT_K_DOWN", 1)
    variant = "+fastscale" if fast else ""
    variant += f"+{upcast}" if upcast != "triton" else ""
    wfmt = "w16a16" if w16 else "w4a4" if a4 else "w4a16"

    def split_label(split: int, kcfg: dict) -> str:
        """This kernel's label: its swap-AB and split-K (moe/_split_k.py) in it, so the case key
        tells them apart and each GEMM's compile is shared by configs that differ only in the
        other GEMM's."""
        tag = variant + ("+swapab" if swap_ab_of(kcfg) else "")
        tag += f"+splitk{split}" if split > 1 else ""
        return f"{wfmt}:{path}{tag}@{key}"

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
        "floats": (),
        "cfg": cfg,
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

    shape = (("n_slots", slots), ("top_k", 8), ("H", hidden), ("INTER", inter))  # both GEMMs
    ptrs, ints = gemm("x", 2 * inter, hidden)
    gate_out = [("out_ptr", "*bf16"), ("outq_ptr", "*u8"), ("outs_ptr", "*u8")]
    split_bufs = [("part_ptr", "*fp32"), ("tile_cnt_ptr", "*i32")]  # split gate_up partials
    bn_d, bk_d = dcfg["BLOCK_N"], dcfg["BLOCK_K"]
    down_ce = {"BLOCK_N": bn_d, "BLOCK_K": bk_d, "SWAP_AB": swap_ab_of(dcfg),
               "EVEN_K": inter % bk_d == 0, "FUSE_SUM": True, "HAS_SHARED": True, "K_PAD": 8,
               "SPLIT_K": sk_down}  # fmt: skip
    gate = build(
        kernel="moe.gate_up",
        fn="gate_up_swiglu_kernel",
        label=split_label(sk_gate, cfg),
        pointers=tuple(ptrs + gate_out + routing + split_bufs),
        ints=(
            *shape,
            *ints,
            ("stride_out", inter),
            ("stride_outq", inter // 2),
            ("stride_outs", inter // 32),
        ),  # fmt: skip
        constexprs=tuple((ce | {"EVEN_K": hidden % bk == 0, "SPLIT_K": sk_gate}).items()),
        stream_bytes_per_iter=2 * (bn * bk * 2 if w16 else bn * bk // 2 + bn * bk // 32),
        **base,
    )
    ptrs, ints = gemm("a", hidden, inter)
    down = build(
        kernel="moe.down",
        fn="down_kernel",
        label=split_label(sk_down, dcfg),
        pointers=tuple(
            ptrs
            # split down partials are fp32 rows
            + [("topk_w_ptr", "*fp32"), ("out_ptr", "*fp32" if sk_down > 1 else "*bf16")]
            + routing
            + [
                ("sum_ptr", "*bf16"),
                ("shared_ptr", "*bf16"),
                ("counter_ptr", "*i32"),
                ("topk_ids_ptr", "*i32"),
            ]
        ),  # fmt: skip
        ints=(
            *shape,
            *ints,
            ("stride_out", hidden),
            ("stride_sum", hidden),
            ("stride_shared", hidden),
        ),  # fmt: skip
        # As launched: the top-k sum folded in (with a shared-expert output), top-8.
        constexprs=tuple((ce | down_ce).items()),
        stream_bytes_per_iter=bn_d * bk_d * 2 if w16 else bn_d * bk_d // 2 + bn_d * bk_d // 32,
        **(base | {"cfg": dcfg}),
    )
    return [gate, down]
