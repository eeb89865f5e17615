"""Launch configs chosen from compiler data ("source": "static"), no GPU needed.

For each arch and token bucket, candidates are compiled (the compile matrix machinery, cached);
a candidate qualifies when every kernel it launches passes the gate (compiles, no spills, memory
in budget, required instructions, 16-byte weight stream, no redundant warps). Among those the
pick has the least predicted time (costmodel/: per-pipe issue, latency, memory, waves and
launch bounds from the compiled code and the bucket's launch grid, calibrated on the H200
rows), ties to fewer warps and stages.
Used by scripts/tune_moe.py --static and scripts/tune_attention.py --static.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from sgl_kernel_rocm.compile_check import cases as C
from sgl_kernel_rocm.compile_check.archs import ARCHS, native_dot_scaled
from sgl_kernel_rocm.compile_check.build import run_matrix, triton_version
from sgl_kernel_rocm.compile_check.costmodel import model
from sgl_kernel_rocm.compile_check.costmodel.launches import expert_counts, moe_launches
from sgl_kernel_rocm.compile_check.gate import violations

TOP_K = 8
MOE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
# GLM-5.2 MoE (hidden 6144, moe_intermediate 2048, 256 experts, top-8) per parallel layout.
GLM_LAYOUTS = {"TP1": (256, 6144, 2048), "TP8": (256, 6144, 256), "EP8": (32, 6144, 2048)}
DEFAULT_LAYOUT = (256, 6144, 2048)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def moe_block_m(m: int, experts: int) -> int:
    """M tile = expected slots per expert, at least 16 (dot dims), at most 128."""
    return min(max(16, _pow2_at_least(max(1, m * TOP_K // experts))), 128)


def moe_candidates(arch: str) -> list[dict[str, int]]:
    """Decode-size M tiles get the wide search; prefill tiles (BM 64/128) only big N tiles on
    8 warps. Warps that a tile cannot keep busy (gate: redundant warps) are not tried."""
    out = []
    bks = (128, 256) if native_dot_scaled(arch) else (128,)

    def add(bm, bn, bk, warps, st):
        out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps,
                    "num_stages": st})  # fmt: skip

    for bm in (16, 32):
        for bn in (32, 64, 128, 256):
            for bk in bks:
                for warps in (4, 8) if bm * bn >= 64 * 64 else (4,):
                    for st in (1, 2):
                        add(bm, bn, bk, warps, st)
    for bm in (64, 128):
        for bn in (128, 256):
            for st in (1, 2):
                add(bm, bn, 128, 8, st)
    return out


def moe_cases_for(arch: str, cfg: dict, act: str, shape=GLM_LAYOUTS["TP8"]) -> list[C.Case]:
    from sgl_kernel_rocm.moe.config import choose_path

    path = choose_path(arch, False, act_quant=act)
    experts, hidden, inter = shape
    # Unpack and W4A16 dot_scaled: ranked on the variant the plugin's load-time layout selects
    # (one-multiply upcast / fast_math); the shipped table is gated on both (moe_cases).
    fast = path == "unpack" or act == "none"
    return C.moe_pair(arch, cfg, experts, hidden, inter, act, path, "static", fast)


Compiled = list  # [(case, compile record)] of one candidate


def evaluate(groups: dict[str, list[C.Case]], jobs: int | None = None, progress=None):
    """{name: (passes, [(case, record)], problems)} for groups of cases compiled together."""
    flat = [c for cs in groups.values() for c in cs]
    results = dict(
        zip([c.key for c in flat], run_matrix(flat, jobs=jobs, progress=progress), strict=True)
    )
    out = {}
    for name, cs in groups.items():
        problems = [v for c in cs for v in violations(c, results[c.key])]
        out[name] = (not problems, [(c, results[c.key]) for c in cs], problems)
    return out


def pick(
    arch: str,
    cands: Iterable[dict],
    scores: dict[str, tuple[bool, Compiled, list[str]]],
    cost: Callable[[dict], float],
) -> dict | None:
    """The passing candidate with the least predicted time `cost(cfg)` (us), ties to fewer
    warps, then fewer stages."""
    best, best_key = None, None
    for cfg in cands:
        ok, _, _ = scores[_name(cfg)]
        if not ok:
            continue
        key = (cost(cfg), cfg["num_warps"], cfg["num_stages"])
        if best_key is None or key < best_key:
            best, best_key = cfg, key
    return best


@functools.cache
def expert_counts_tuple(tokens: int, experts: int) -> tuple[int, ...]:
    return tuple(expert_counts(tokens, experts))


def moe_cost(arch: str, scores: dict, shape, tokens: int) -> Callable[[dict], float]:
    """Predicted us of gate_up + down of a candidate at `tokens` tokens of `shape` (the ISA of
    the candidate compiled at the TP8 shape; the grid at this shape and token count)."""
    experts, hidden, inter = shape

    def cost(cfg: dict) -> float:
        (gate, grec), (down, drec) = scores[_name(cfg)][1][:2]
        gl, dl = moe_launches(gate, down, experts, hidden, inter, tokens,
                              list(expert_counts_tuple(tokens, experts)))  # fmt: skip
        return sum(model.predict(rec, case.num_warps, case.num_stages, arch, launch).us
                   for (case, rec), launch in ((scores[_name(cfg)][1][0], gl),
                                               (scores[_name(cfg)][1][1], dl)))  # fmt: skip

    return cost


def _name(cfg: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(cfg.items()))


def moe_table(
    arch: str, jobs: int | None = None, progress=None, also: Iterable[Path] = ()
) -> dict[str, Any]:
    """The arch's table; every pick passes the gate at every shape of the table under our
    Triton and the one(s) in `also` (pip --target dirs), or it is dropped and the bucket picks
    again."""
    cands = moe_candidates(arch)
    scores = {}
    for act in ("none", "mxfp4"):
        groups = {_name(c): moe_cases_for(arch, c, act) for c in cands}
        scores[act] = evaluate(groups, jobs, progress)
    for _ in range(12):
        table = _moe_build(arch, cands, scores)
        # Candidates were scored at one shape; the table's picks are checked at every shape it
        # names, under our Triton and each other one.
        failed = _failing_elsewhere(C.dedupe(C.moe_cases(arch, table)), [None, *also], jobs)
        if not failed:
            table["_meta"] = meta(arch, "moe", also)
            return table
        for case in failed:  # drop (path, tile) from the activation formats it failed for
            acts = ("mxfp4",) if case.label.startswith("w4a4") else ("none",)
            name = _name(case.config())
            for act in acts:
                scores[act][name] = (False, [], [f"fails under another Triton: {case.key}"])
    raise RuntimeError(f"{arch}: picks keep failing under {list(also)}")


def _failing_elsewhere(cases: list[C.Case], also: Iterable[Path | None], jobs) -> list[C.Case]:
    bad = []
    for triton_dir in also:
        for case, rec in zip(cases, run_matrix(cases, jobs=jobs, triton_dir=triton_dir),
                             strict=True):  # fmt: skip
            if violations(case, rec):
                bad.append(case)
    return bad


def _moe_build(arch: str, cands: list[dict], scores: dict) -> dict[str, Any]:
    def bucket(m: int, shape, act: str) -> dict:
        experts, _, inter = shape
        bm = moe_block_m(m, experts)
        cost = moe_cost(arch, scores[act], shape, m)

        # The M tile the bucket wants; when none of its candidates passes the gate (e.g. SGPR
        # spills of the unpack path at BM 16 on gfx942), the next bigger one (padded rows cost
        # matrix work, which decode has to spare, not weight bytes), then smaller ones.
        order = [b for b in (16, 32, 64, 128) if b >= bm] + [b for b in (64, 32, 16) if b < bm]
        cfg = None
        for b in order:
            mine = [c for c in cands if c["BLOCK_M"] == b and c["BLOCK_K"] <= inter]
            if (cfg := pick(arch, mine, scores[act], cost)) is not None:
                break
        if cfg is None:
            raise RuntimeError(f"{arch} {act}: no candidate passes the gate at {shape}, m={m}")
        return cfg

    table: dict[str, Any] = {"_meta": meta(arch, "moe")}
    for shape in GLM_LAYOUTS.values():
        for act in ("none", "mxfp4"):
            key = _moe_key(shape, act)
            table[key] = {f"M_LEQ_{m}": bucket(m, shape, act) for m in MOE_BUCKETS}
            table[key]["any"] = bucket(16384, shape, act)
    # Unknown shapes: one default per activation format (moe/config.py resolve_config).
    for act, key in (("none", "DEFAULT_a16"), ("mxfp4", "DEFAULT_a4")):
        table[key] = {f"M_LEQ_{m}": bucket(m, DEFAULT_LAYOUT, act) for m in (16, 256)}
        table[key]["any"] = bucket(16384, DEFAULT_LAYOUT, act)
    return table


def _moe_key(shape, act) -> str:
    from sgl_kernel_rocm.moe.config import shape_key

    return shape_key(*shape, act)


def meta(arch: str, what: str, also: Iterable[Path] = ()) -> dict[str, Any]:
    return {
        "source": "static",
        "how": f"scripts/tune_{what}.py --static: not measured; chosen from compiler data "
        "(triton.compile for this arch on a CPU box): among candidates that pass the compile "
        "gate (no spills, LDS/SMEM in budget, required instructions, 16-byte weight loads), "
        "the least time predicted by the cost model (compile_check/costmodel, calibrated on "
        "the H200 rows of 2026-11-30; other archs: model calibrated on sm90, their constants "
        "from costmodel/perf.json)",
        "triton": triton_version(),
        "also_passes_under_triton": [triton_version(Path(d)) for d in also],
        "date": datetime.date.today().isoformat(),
        "hardware": "none (compiled only; no GPU ran these)",
    }


# --------------------------------------------------------------------------- decode attention

ATTN_OPS = {
    "decode_gqa": ("gqa", C.gqa_cases),
    "decode_mla": ("mla", C.mla_cases),
    "decode_dsa": ("mla", C.mla_cases),
    "decode_dsa_indexer": ("indexer", C.indexer_cases),
}
# Split planning stays as it was derived (programs to fill the chip, tokens per split); only the
# tile (BLOCK_N, warps, stages) is chosen from compiler data.
_SPLITS = {
    "M_LEQ_8": {"target_programs": 2, "min_split_tokens": 256},
    "M_LEQ_64": {"target_programs": 2, "min_split_tokens": 512},
    "any": {"target_programs": 1, "min_split_tokens": 1024},
}
# DSA attends 2,048 selected keys whatever the context: at batch 1 with every head in one program
# the 256-token rule would leave 8 programs for the whole chip, so small batches split finer.
_SPLITS_BY_OP = {
    "decode_dsa": {
        "M_LEQ_8": {"target_programs": 2, "min_split_tokens": 64},
        "M_LEQ_64": {"target_programs": 2, "min_split_tokens": 256},
        "any": {"target_programs": 1, "min_split_tokens": 1024},
    },
}
_MLA_OPS = ("decode_mla", "decode_dsa")


def attention_candidates(op: str = "decode_gqa") -> list[dict[str, int]]:
    """Tiles to compile. MLA/DSA also choose BLOCK_H, the most heads one program holds (all of
    a rank's heads read the latent once; fewer re-read it but hold a smaller accumulator), with
    one pipeline stage (the loop is bound by its MMAs and converts, not by load latency)."""
    if op in _MLA_OPS:
        return [
            {"BLOCK_N": bn, "num_warps": w, "num_stages": 1, "BLOCK_H": bh}
            for bn in (16, 32, 64)
            for w in (4, 8)
            for bh in (16, 32, 64)
        ]
    return [
        {"BLOCK_N": bn, "num_warps": w, "num_stages": st}
        for bn in (16, 32, 64)
        for w in (4, 8)
        for st in (1, 2)
    ]


def _mla_cases_for(op: str, arch: str, cfg: dict) -> list[C.Case]:
    """The candidate at every GLM-5.2 head count per rank, bf16 and FP8 latent; stream bytes
    are the unique latent bytes (C.mla_case divides by the head blocks that re-read them)."""
    from sgl_kernel_rocm.attention.mla_decode import mla_block_h

    out = []
    for heads in C.MLA_HEADS:
        for kv in ("bf16", "fp8"):
            kv_t, kv_b = C.kv_type(arch, kv)
            block_h = mla_block_h(cfg, heads)
            out.append(C.mla_case(arch, op, op == "decode_dsa", cfg, heads, block_h, kv, kv_t,
                                   kv_b, cfg["BLOCK_N"]))  # fmt: skip
    return out


def _attn_cases(op: str, arch: str, cfg: dict) -> list[C.Case]:
    if op in _MLA_OPS:
        return _mla_cases_for(op, arch, cfg)
    _, make = ATTN_OPS[op]
    sparse = op == "decode_dsa"
    out = []
    for case in make(arch):
        if case.kernel == "attn.dsa_decode" and not sparse:
            continue
        if case.kernel == "attn.mla_decode" and sparse:
            continue
        ce = dict(case.constexprs) | {"BLOCK_N": cfg["BLOCK_N"]}
        bytes_per_row = case.stream_bytes_per_iter // dict(case.constexprs)["BLOCK_N"]
        out.append(
            C.Case(
                **{
                    **case.__dict__,
                    "constexprs": tuple(ce.items()),
                    "num_warps": cfg["num_warps"],
                    "num_stages": cfg["num_stages"],
                    "stream_bytes_per_iter": bytes_per_row * cfg["BLOCK_N"],
                }
            )
        )
    # One set per tile: the table's buckets all hold the same tile, so keep one of each.
    seen, uniq = set(), []
    for c in out:
        if c.key not in seen:
            seen.add(c.key)
            uniq.append(c)
    return uniq


# The decode point attention tiles are ranked at: batch 32 at the 20k-token target context.
ATTN_BATCH, ATTN_CTX, DSA_KEYS = 32, 20480, 2048


def _attn_launch(op: str, arch: str, case: C.Case, cfg: dict) -> model.Launch:
    """The split kernel's launch at the ranking point, with the bucket's split plan."""
    from sgl_kernel_rocm.attention._common import plan_splits
    from sgl_kernel_rocm.compile_check.costmodel.launches import mla_launches

    plan = _buckets(op, arch, cfg)["M_LEQ_64"]
    if op in _MLA_OPS:
        heads = int(case.label.split(":h")[1].split("_")[0])
        kv_b = 1 if case.label.startswith("kvfp8") else 2
        top_k = DSA_KEYS if op == "decode_dsa" else None
        return mla_launches(case, plan, ATTN_BATCH, heads, ATTN_CTX, top_k, kv_b)[0]
    bn = int(dict(case.constexprs)["BLOCK_N"])
    bytes_per_token = case.stream_bytes_per_iter // bn
    if op == "decode_dsa_indexer":  # tiles_per_prog tiles of BLOCK_N keys per program
        tiles = dict(case.ints)["tiles_per_prog"]
        programs = ATTN_BATCH * -(-ATTN_CTX // (bn * tiles))
        return model.Launch(programs, tiles, ATTN_BATCH * ATTN_CTX * bytes_per_token,
                            case.stream_bytes_per_iter)  # fmt: skip
    splits = plan_splits(plan, ATTN_BATCH, ATTN_CTX)  # GQA: one KV head per rank under TP8
    per_split = -(-ATTN_CTX // splits)
    return model.Launch(
        ATTN_BATCH * splits,
        -(-per_split // bn),
        ATTN_BATCH * ATTN_CTX * bytes_per_token,
        case.stream_bytes_per_iter,
    )


def attention_cost(op: str, arch: str, scores: dict) -> Callable[[dict], float]:
    """Predicted us of a candidate tile summed over its compiled cases (head counts, KV dtypes)
    at the ranking point."""

    def cost(cfg: dict) -> float:
        return sum(model.predict(rec, case.num_warps, case.num_stages, arch,
                                 _attn_launch(op, arch, case, cfg)).us
                   for case, rec in scores[_name(cfg)][1])  # fmt: skip

    return cost


def _pick_passing(arch, cands, groups, scores, also, jobs, what: str, op: str) -> dict:
    """Least predicted time among candidates passing the gate here and under `also`."""
    scores = dict(scores)
    cost = attention_cost(op, arch, scores)
    for _ in range(len(cands)):
        cfg = pick(arch, cands, scores, cost)
        if cfg is None:
            raise RuntimeError(f"{what} on {arch}: no candidate passes the gate")
        if not _failing_elsewhere(groups[_name(cfg)], also, jobs):
            return cfg
        scores[_name(cfg)] = (False, [], ["fails under another Triton"])
    raise RuntimeError(f"{what} on {arch}: no candidate passes the gate")


def _buckets(op: str, arch: str, cfg: dict) -> dict[str, dict]:
    units = ARCHS[arch]["units"]
    return {
        bucket: cfg
        | {
            "target_programs": s["target_programs"] * units,
            "min_split_tokens": s["min_split_tokens"],
        }  # fmt: skip
        for bucket, s in _SPLITS_BY_OP.get(op, _SPLITS).items()
    }


def attention_table(
    op: str, arch: str, jobs: int | None = None, progress=None, also: Iterable[Path] = ()
) -> dict:
    """The op's table. MLA/DSA get one tile per head count: DEFAULT from the TP8 shape (8 heads
    per rank, and any count the table does not name) and `h64_d576_kv{16,fp8}` entries for DP
    attention (all 64 heads), each the best at its own shape rather than a compromise."""
    cands = attention_candidates(op)
    groups = {_name(c): _attn_cases(op, arch, c) for c in cands}
    scores = evaluate(groups, jobs, progress)
    table: dict[str, Any] = {"_meta": meta(arch, "attention", also)}
    if op not in _MLA_OPS:
        table["DEFAULT"] = _buckets(op, arch, _pick_passing(arch, cands, groups, scores, also,
                                                             jobs, op, op))  # fmt: skip
        return table
    small, *wide = C.MLA_HEADS
    sub = {n: [c for c in cs if f":h{small}_" in c.label] for n, cs in groups.items()}
    sub_scores = evaluate(sub, jobs, progress)
    table["DEFAULT"] = _buckets(op, arch, _pick_passing(arch, cands, sub, sub_scores, also, jobs,
                                                        f"{op} h{small}", op))  # fmt: skip
    for heads in wide:
        for kv, tag in (("bf16", "16"), ("fp8", "fp8")):
            sub = {n: [c for c in cs if c.label.startswith(f"kv{kv}:h{heads}_")]
                   for n, cs in groups.items()}  # fmt: skip
            sub_scores = evaluate(sub, jobs, progress)
            cfg = _pick_passing(arch, cands, sub, sub_scores, also, jobs, f"{op} h{heads} {kv}", op)
            table[f"h{heads}_d576_kv{tag}"] = _buckets(op, arch, cfg)
    return table
