"""Launch grids of the package's kernels at a shape, as the wrappers launch them: how many
programs do work, how many exit at once, main-loop iterations, bytes per iteration and the
unique HBM bytes of the launch (costmodel.model.Launch)."""

from __future__ import annotations

from typing import Any

from sgl_kernel_rocm.compile_check.cases import Case
from sgl_kernel_rocm.compile_check.costmodel.model import Launch

TOP_K = 8
MX_BYTES = 0.5 + 1 / 32  # one E2M1 value + its share of an E8M0 scale
LATENT, D_LAT = 576, 512


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def expert_counts(tokens: int, experts: int, seed: int = 0) -> list[int]:
    """Slots per expert of the GPU check's routing (benchmark/gpu_check/moe.py: a cycle through
    a permutation while tokens x top-k <= experts, else top-k distinct experts per token drawn
    from the same seeded generator), first rotation."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    perm = torch.randperm(experts, generator=g)
    if tokens * TOP_K <= experts:
        ids = perm[: tokens * TOP_K]
    else:
        ids = torch.cat([torch.randperm(experts, generator=g)[:TOP_K] for _ in range(tokens)])
    counts = torch.bincount(ids, minlength=experts)
    return [int(c) for c in counts if c > 0]


def moe_launches(
    gate: Case,
    down: Case,
    experts: int,
    hidden: int,
    inter: int,
    tokens: int,
    counts: list[int] | None = None,
) -> tuple[Launch, Launch]:
    """gate_up and down of the fused MoE (moe/triton_moe.py: a worst-case grid of M blocks whose
    surplus programs exit; N tiles of INTER for gate_up, of H for down; x SPLIT_K along K, each
    split running cdiv(K blocks, SPLIT_K) of them and writing + re-reading an fp32 partial)."""
    from sgl_kernel_rocm.moe.align import worst_case_capacity

    cfg = dict(gate.constexprs)
    sk_g, sk_d = int(cfg.get("SPLIT_K", 1)), int(dict(down.constexprs).get("SPLIT_K", 1))
    bm, bn, bk = int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"]), int(cfg["BLOCK_K"])
    w16 = bool(cfg.get("W16"))
    per = 2.0 if w16 else MX_BYTES
    counts = counts if counts is not None else expert_counts(tokens, experts)
    used = len(counts)
    blocks = sum(_cdiv(c, bm) for c in counts)
    bound = worst_case_capacity(tokens * TOP_K, experts, bm) // bm
    act = tokens * hidden * 2
    # The down GEMM's own tile (config "down"), BLOCK_M shared.
    dce = dict(down.constexprs)
    bn_d, bk_d = int(dce["BLOCK_N"]), int(dce["BLOCK_K"])
    n_gate, n_down = _cdiv(inter, bn), _cdiv(hidden, bn_d)
    slots = tokens * TOP_K
    # Split partials: fp32, written once and read once (an upper bound: they mostly stay in L2).
    part_g = 2 * slots * 2 * inter * 4 * sk_g if sk_g > 1 else 0
    part_d = 2 * slots * hidden * 4 * sk_d if sk_d > 1 else 0
    gate_l = Launch(
        programs=blocks * n_gate * sk_g,
        iters=_cdiv(_cdiv(hidden, bk), sk_g),
        hbm_bytes=used * 2 * inter * hidden * per + act + slots * inter * 2 + part_g,
        bytes_per_iter=gate.stream_bytes_per_iter + bm * bk * 2,
        empty_programs=(bound - blocks) * n_gate * sk_g,
    )
    down_l = Launch(
        programs=blocks * n_down * sk_d,
        iters=_cdiv(_cdiv(inter, bk_d), sk_d),
        hbm_bytes=used * hidden * inter * per + slots * inter * 2 + act + part_d,
        bytes_per_iter=down.stream_bytes_per_iter + bm * bk_d * 2,
        empty_programs=(bound - blocks) * n_down * sk_d,
    )
    return gate_l, down_l


def mla_splits(cfg: dict[str, Any], programs_per_split: int, work: int) -> int:
    from sgl_kernel_rocm.attention._common import plan_splits

    return plan_splits(cfg, programs_per_split, work)


def mla_launches(
    case: Case,
    cfg: dict[str, Any],
    batch: int,
    heads: int,
    ctx: int,
    top_k: int | None,
    kv_bytes: int = 1,
) -> tuple[Launch, Launch | None, int]:
    """The split kernel and, when it splits, the merge (attention/mla_decode.py mla_decode):
    (split launch, merge launch or None, splits)."""
    ce = dict(case.constexprs)
    block_h, bn = int(ce["BLOCK_H"]), int(ce["BLOCK_N"])
    head_blocks = _cdiv(heads, block_h)
    work = min(top_k, ctx) if top_k else ctx
    splits = mla_splits(cfg, batch * head_blocks, work)
    per_split = _cdiv(work, splits)
    partial = batch * heads * splits * (D_LAT + 1) * 4 if splits > 1 else 0
    split = Launch(
        programs=batch * head_blocks * splits,
        iters=_cdiv(per_split, bn),
        hbm_bytes=batch * work * LATENT * kv_bytes
        + batch * heads * (LATENT + D_LAT) * 2
        + partial
        + (batch * work * 4 if top_k else 0),
        bytes_per_iter=bn * LATENT * kv_bytes,
    )
    if splits == 1:
        return split, None, 1
    merge = Launch(
        programs=batch * heads,
        iters=1,
        hbm_bytes=partial + batch * heads * D_LAT * 2,
        bytes_per_iter=splits * (D_LAT + 1) * 4,
    )
    return split, merge, splits
