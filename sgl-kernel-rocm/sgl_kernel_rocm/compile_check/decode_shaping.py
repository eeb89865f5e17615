"""Decode shaping of a shipped MoE table from compiler data (no GPU): for each decode bucket of
the named shapes, keep the bucket's tile (BLOCK_M, BLOCK_K, warps) and choose its split-K per
GEMM (`SPLIT_K` for gate_up over H, `SPLIT_K_DOWN` for down over INTER), then its pipeline
depth (`num_stages`), by the cost model's predicted time at the bucket's launch grid, among
variants whose every kernel passes the compile gate under our Triton and each Triton in `also`.
At every decode bucket (<= SWAP_MAX_TOKENS tokens: at most a few slots per expert, so a
16-row token tile is mostly padding) the tile's orientation is chosen with the splits: the
bucket's tile and BLOCK_N 64 / 128, each as is and with `SWAP_AB` (the weights on the MMA's M
side, which gives Hopper's wgmma its 64 rows), so a swap is credited only against the same
BLOCK_N unswapped.

Each tile's splits first at the shipped depth, then each tile's best splits at every depth in
STAGES (the model's latency term is what both move: a short grid keeps too few bytes in
flight). Of all those, gate_up and down are chosen apart: their predicted times add and each
depends only on its own tile and split, so the down GEMM may keep a tile of its own (the
table's "down" entry). Used by scripts/tune_moe.py --decode-shaping.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sgl_kernel_rocm.compile_check import cases as C
from sgl_kernel_rocm.compile_check.build import run_matrix
from sgl_kernel_rocm.compile_check.costmodel import model
from sgl_kernel_rocm.compile_check.costmodel.launches import moe_launches
from sgl_kernel_rocm.compile_check.gate import violations
from sgl_kernel_rocm.compile_check.static_tune import expert_counts_tuple, moe_cases_for
from sgl_kernel_rocm.moe.config import SPLIT_KEYS

DECODE_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
SPLITS = (1, 2, 4, 8)
STAGES = (1, 2, 3, 4)  # pipeline depths tried on each tile's best splits
MIN_BLOCKS_PER_SPLIT = 2  # a split of one K block is all prologue and epilogue
SWAP_MAX_TOKENS = 64  # swap-AB is tried at these buckets (the decode ones)
SWAP_BLOCK_N = (64, 128)  # weight rows per program when swapped: wgmma's M is 64


def _shape(key: str) -> tuple[int, int, int]:
    e, h, i = key.split("_")[:3]
    return int(e[1:]), int(h[1:]), int(i[1:])


def _splits(k_dim: int, bk: int) -> list[int]:
    blocks = -(-k_dim // bk)
    return [s for s in SPLITS if s == 1 or -(-blocks // s) >= MIN_BLOCKS_PER_SPLIT]


def tiles(cfg: dict, tokens: int) -> list[dict]:
    """The tile orientations tried at a bucket: the bucket's own, and at <= SWAP_MAX_TOKENS its
    BLOCK_N in SWAP_BLOCK_N, each unswapped and swapped (an unswapped tile carries no key)."""
    plain = {k: v for k, v in cfg.items() if k != "SWAP_AB"}
    out = [dict(cfg)]
    if tokens <= SWAP_MAX_TOKENS:
        for bn in sorted({cfg["BLOCK_N"], *SWAP_BLOCK_N}):
            out += [plain | {"BLOCK_N": bn}, plain | {"BLOCK_N": bn, "SWAP_AB": True}]
    seen, uniq = set(), []
    for c in out:
        sig = tuple(sorted(c.items()))
        if sig not in seen:
            seen.add(sig)
            uniq.append(c)
    return uniq


def variants(cfg: dict, shape) -> list[dict]:
    """Split variants of a bucket's config (gate and down split apart: each kernel's compile
    depends only on its own split)."""
    _, hidden, inter = shape
    out = []
    for sg in _splits(hidden, cfg["BLOCK_K"]):
        for sd in _splits(inter, cfg["BLOCK_K"]):
            out.append(cfg | {"SPLIT_K": sg, "SPLIT_K_DOWN": sd})
    return out


class _Scorer:
    """Compiles (cached) and gates each variant's two kernels, predicts their time."""

    def __init__(self, arch: str, act: str, jobs: int | None, also: Iterable[Path | None]):
        self.arch, self.act, self.jobs, self.also = arch, act, jobs, list(also)
        self.recs: dict[str, tuple[bool, dict]] = {}

    def _pair(self, cfg: dict, shape) -> list[C.Case]:
        return moe_cases_for(self.arch, cfg, self.act, shape)

    def compile(self, cfgs: list[dict], shape) -> None:
        cases = {c.key: c for cfg in cfgs for c in self._pair(cfg, shape)}
        todo = [c for k, c in cases.items() if k not in self.recs]
        for triton_dir in [None, *self.also]:
            recs = run_matrix(todo, jobs=self.jobs, triton_dir=triton_dir)
            for case, rec in zip(todo, recs, strict=True):
                ok = not violations(case, rec)
                prev = self.recs.get(case.key)
                # The record the model reads is ours (first); every Triton must pass.
                self.recs[case.key] = (ok and (prev is None or prev[0]), prev[1] if prev else rec)

    def cost(self, cfg: dict, shape, tokens: int) -> float | None:
        """Predicted us of gate_up + down, or None when a kernel fails the gate."""
        got = self.predict(cfg, shape, tokens)
        return None if got is None else got["us"]

    def predict(self, cfg: dict, shape, tokens: int) -> dict[str, Any] | None:
        """{us, frac_copy (of the model's copy bandwidth), bound per kernel}, or None when a
        kernel fails the gate."""
        gate, down = self._pair(cfg, shape)
        (gok, grec), (dok, drec) = self.recs[gate.key], self.recs[down.key]
        if not (gok and dok):
            return None
        gl, dl = moe_launches(
            gate, down, *shape, tokens, list(expert_counts_tuple(tokens, shape[0]))
        )
        preds = [model.predict(rec, case.num_warps, case.num_stages, self.arch, launch)
                 for case, rec, launch in ((gate, grec, gl), (down, drec, dl))]  # fmt: skip
        us = sum(p.us for p in preds)
        copy = model.constants(self.arch)["copy_tb_s"] * 1e6
        return {"us": us, "frac_copy": round((gl.hbm_bytes + dl.hbm_bytes) / (us * copy), 3),
                "bound": {"gate_up": preds[0].bound, "down": preds[1].bound},
                "gate_up_us": preds[0].us, "down_us": preds[1].us}  # fmt: skip

    def part_cost(self, cfg: dict, shape, tokens: int, part: str) -> float | None:
        """Predicted us of one GEMM ("gate_up" or "down") of `cfg`: each kernel's time depends
        only on its own tile and split, so the two can be chosen apart."""
        got = self.predict(cfg, shape, tokens)
        return None if got is None else got[f"{part}_us"]


def _best(scorer: _Scorer, cfgs: list[dict], shape, tokens: int) -> tuple[dict, float]:
    best, best_us = None, None
    for cfg in cfgs:
        us = scorer.cost(cfg, shape, tokens)
        # Ties keep the earlier (fewer splits, shallower pipeline): less partial traffic.
        if us is not None and (best_us is None or us < best_us * 0.995):
            best, best_us = cfg, us
    if best is None:
        raise RuntimeError(f"no variant of {cfgs[0]} passes the gate at {shape}, m={tokens}")
    return best, best_us


def _best_part(scorer, cfgs: list[dict], shape, tokens: int, part: str) -> dict:
    """The variant whose `part` GEMM is predicted fastest (ties keep the earlier)."""
    best, best_us = None, None
    for cfg in cfgs:
        us = scorer.part_cost(cfg, shape, tokens, part)
        if us is not None and (best_us is None or us < best_us * 0.995):
            best, best_us = cfg, us
    if best is None:
        raise RuntimeError(f"no variant of {cfgs[0]} passes the gate at {shape}, m={tokens}")
    return best


def combine(gate_cfg: dict, down_cfg: dict) -> dict:
    """One table entry running gate_up as `gate_cfg` and down as `down_cfg` (both variants of
    one bucket: same BLOCK_M): gate_cfg's tile and SPLIT_K, down_cfg's SPLIT_K_DOWN, and a
    "down" entry with whatever of down_cfg's tile differs (none when the tiles agree)."""
    from sgl_kernel_rocm.moe.config import DOWN_TILE_KEYS, SWAP_KEY, down_config, swap_ab_of

    out = {k: v for k, v in gate_cfg.items() if k not in ("SPLIT_K_DOWN", "down")}
    if down_cfg.get("SPLIT_K_DOWN", 1) != 1:
        out["SPLIT_K_DOWN"] = down_cfg["SPLIT_K_DOWN"]
    want, have = down_config(down_cfg), down_config(out)
    over = {k: want[k] for k in DOWN_TILE_KEYS if k != SWAP_KEY and want[k] != have[k]}
    if swap_ab_of(want) != swap_ab_of(have):
        over[SWAP_KEY] = swap_ab_of(want)
    if over:
        out["down"] = over
    return out


def shape_decode(
    arch: str,
    table: dict[str, Any],
    keys: Iterable[str],
    jobs: int | None = None,
    also: Iterable[Path | None] = (),
    log=print,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(new table, one report row per (key, bucket): before / after config and predicted us)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in table.items()}
    report = []
    for key in keys:
        shape = _shape(key)
        act = "mxfp4" if key.endswith("_a4") else "none"
        scorer = _Scorer(arch, act, jobs, also)
        for m in DECODE_BUCKETS:
            bucket = f"M_LEQ_{m}"
            # "before" is the bucket as shipped (splits, orientation and depth included).
            shipped = dict(table[key][bucket])
            base = {k: v for k, v in shipped.items() if k not in (*SPLIT_KEYS, "down")}
            by_tile = [variants(t, shape) for t in tiles(base, m)]
            scorer.compile([v for vs in by_tile for v in vs] + [shipped], shape)
            before_us = scorer.cost(shipped, shape, m)
            # Each tile's best splits, then every pipeline depth on each of those: a tile that
            # loses at the shipped depth may win at another.
            depths = []
            for vs in by_tile:
                if any(scorer.cost(v, shape, m) is not None for v in vs):
                    top, _ = _best(scorer, vs, shape, m)
                    depths += [top] + [top | {"num_stages": s} for s in STAGES
                                       if s != top["num_stages"]]  # fmt: skip
            if not depths:
                _best(scorer, by_tile[0], shape, m)  # raises: nothing passes the gate
            scorer.compile(depths, shape)
            # gate_up and down chosen apart (their times add): the down GEMM may keep a tile of
            # its own (the table's "down" entry).
            pick = combine(_best_part(scorer, depths, shape, m, "gate_up"),
                           _best_part(scorer, depths, shape, m, "down"))  # fmt: skip
            scorer.compile([pick], shape)
            us = scorer.cost(pick, shape, m)
            pick = {k: v for k, v in pick.items()
                    if k not in SPLIT_KEYS or v != 1}  # fmt: skip
            out[key][bucket] = pick
            before, after = scorer.predict(shipped, shape, m), scorer.predict(pick, shape, m)
            row = {"arch": arch, "key": key, "bucket": bucket, "tokens": m, "before": shipped,
                   "before_us": before_us, "after": pick, "after_us": us,
                   "before_frac_copy": before and before["frac_copy"],
                   "before_bound": before and before["bound"],
                   "after_frac_copy": after["frac_copy"],
                   "after_bound": after["bound"]}  # fmt: skip
            report.append(row)
            log(f"{arch} {key} {bucket}: {before_us and round(before_us, 1)} us -> "
                f"{round(us, 1)} us with {pick}")  # fmt: skip
    return out, report
