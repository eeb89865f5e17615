"""MoE cases of the GPU check: the fused MXFP4 MoE (W4A16) at GLM-5.2's per-GPU layouts, gate_up
and down timed separately, and a bf16-weight variant of our kernel when the tree has one.

Routing rotates between calls so consecutive calls touch different experts (at 1-4 tokens the
8-32 experts one call reads would otherwise stay in L2): the cycle covers every expert.
"""

from __future__ import annotations

import itertools
from typing import Any

import sgl_kernel_rocm.moe as moe_pkg
import torch
from plan import TOP_K
from sgl_kernel_rocm.moe import MoEWeights, fused_moe_mxfp4
from sgl_kernel_rocm.moe.layout import prepare_weights
from sgl_kernel_rocm.moe.reference import fused_moe_reference
from sgl_kernel_rocm.moe.synthetic import random_moe_inputs

# Names under which a bf16-weight version of our fused MoE kernel is looked up (first found
# wins); called as fn(x, MoEWeights.dense(w13 [E, 2I, H], w2 [E, H, I]) bf16, topk_weights,
# topk_ids).
BF16_MOE_NAMES = ("fused_moe_bf16", "fused_moe_bf16_weights", "fused_moe_w16a16")


def find_bf16_moe(name: str | None = None):
    """(name, callable) of the bf16-weight MoE in sgl_kernel_rocm.moe, or (None, reason)."""
    for cand in (name,) if name else BF16_MOE_NAMES:
        fn = getattr(moe_pkg, cand, None)
        if callable(fn):
            return cand, fn
    return None, (
        f"no bf16-weight MoE in sgl_kernel_rocm.moe (looked for {', '.join(BF16_MOE_NAMES)})"
    )


def _routings(tokens: int, experts: int, n: int, device, seed: int):
    """n routings [tokens, TOP_K]; with few tokens each covers different experts (a cycle
    through a permutation), so the whole set of experts is read once per cycle."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    perm = torch.randperm(experts, generator=g)
    out = []
    for r in range(n):
        if tokens * TOP_K <= experts:
            ids = perm.roll(-r * tokens * TOP_K)[: tokens * TOP_K].view(tokens, TOP_K)
        else:
            ids = torch.stack([torch.randperm(experts, generator=g)[:TOP_K] for _ in range(tokens)])
        w = torch.rand(tokens, TOP_K, generator=g)
        out.append((ids.to(device, torch.int32), (w / w.sum(1, keepdim=True)).to(device)))
    return out


def weight_bytes(p: dict[str, Any], experts_used: float, bf16: bool = False) -> dict[str, float]:
    """HBM bytes of weights one call reads: MXFP4 values + E8M0 scales (or bf16) per expert."""
    h, i = p["hidden"], p["inter"]
    per = 2.0 if bf16 else 0.5 + 1 / 32
    return {"gate_up": experts_used * 2 * i * h * per, "down": experts_used * h * i * per}


_WEIGHTS: dict[tuple, MoEWeights] = {}


def _weights(e: int, h: int, i: int, dev: str, bf16: bool) -> MoEWeights:
    """Random weights per layout, made once on the device and shared by every token count."""
    key = (e, h, i, dev, bf16)
    if key not in _WEIGHTS:
        # One layout at a time (the plan runs a layout's cases together): drop other layouts.
        for old in [k for k in _WEIGHTS if k[:4] != key[:4]]:
            del _WEIGHTS[old]
        if bf16:
            w13 = torch.empty(e, 2 * i, h, device=dev, dtype=torch.bfloat16).normal_(0, 0.02)
            w2 = torch.empty(e, h, i, device=dev, dtype=torch.bfloat16).normal_(0, 0.02)
            _WEIGHTS[key] = MoEWeights.dense(w13, w2)
        elif dev == "cpu":
            _WEIGHTS[key] = random_moe_inputs(1, e, h, i, TOP_K, device=dev)[1]
        else:
            # MXFP4 bytes and E8M0 scales 2**-8..2**-5 (random_moe_inputs' ranges), on the GPU.
            def u8(*shape, low=0, high=256):
                return torch.randint(low, high, shape, dtype=torch.uint8, device=dev)

            _WEIGHTS[key] = MoEWeights(
                u8(e, 2 * i, h // 2), u8(e, 2 * i, h // 32, low=119, high=123),
                u8(e, h, i // 2), u8(e, h, i // 32, low=119, high=123),
            )  # fmt: skip
    return _WEIGHTS[key]


def no_split_config(p: dict[str, Any], dev: str) -> dict[str, Any]:
    """The shipped config of this row with its split-K dropped (SPLIT_K = SPLIT_K_DOWN = 1):
    the A/B baseline of the split-K rows."""
    from sgl_kernel_rocm.arch import current_arch
    from sgl_kernel_rocm.moe.config import SPLIT_KEYS, resolve_config

    arch = current_arch() if dev != "cpu" else "cpu"
    cfg, _ = resolve_config(arch, p["tokens"], p["experts"], p["hidden"], p["inter"], "none")
    return {k: v for k, v in cfg.items() if k not in SPLIT_KEYS}


def moe_case(p: dict[str, Any], seed: int = 0, split: bool = True) -> dict[str, Any]:
    """The shipped MoE at row `p`; `split=False`: the same tile without split-K."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    m, e = p["tokens"], p["experts"]
    weights = _weights(e, p["hidden"], p["inter"], dev, bf16=False)
    x = torch.randn(m, p["hidden"], device=dev).to(torch.bfloat16)
    n_rot = max(1, min(8, -(-e // (m * TOP_K))))
    routes = _routings(m, e, n_rot, dev, seed)
    used = sum(r[0].unique().numel() for r in routes) / len(routes)
    cyc = itertools.cycle(routes)

    # What serving runs: the plugin prepares the layout at load (process_weights_after_loading).
    layout = prepare_weights(weights)
    config = None if split else no_split_config(p, dev)

    def call(route=None):
        # Always the Triton kernels (on the CPU dry run through the interpreter).
        ids, w = route or next(cyc)
        return fused_moe_mxfp4(x, weights, w, ids, backend="triton", layout=layout,
                               config=config)  # fmt: skip

    def check():
        ids, w = routes[0]
        return call(routes[0]), fused_moe_reference(x, weights, w, ids)

    return {"fn": call, "check": check, "bytes": weight_bytes(p, used),
            "experts_per_call": used, "rotations": n_rot,
            "args": (x, weights), "routes": cyc, "route0": routes[0],
            "layout": layout}  # fmt: skip


def ep_local_ids(global_ids: torch.Tensor, ep_rank: int, local_experts: int) -> torch.Tensor:
    """Global top-k ids as one EP rank's MoE receives them: SGLang 0.5.23's StandardDispatcher
    (moe_ep_size > 1, token_dispatcher/standard.py) gives rank r the contiguous experts
    [r * L, (r + 1) * L) as local ids 0..L-1 and maps every other id, and -1, to -1."""
    local = global_ids - ep_rank * local_experts
    return torch.where((local >= 0) & (local < local_experts), local, -1).to(torch.int32)


def moe_ep_case(p: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """EP8 with global routing: each token picks TOP_K of `global_experts` at random, then the
    ids are mapped to this rank's local experts; at top-8 of 256 over 8 ranks about (7/8)**8 =
    34% of the tokens have no local expert and arrive fully masked (their rows must be zeros)."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    m, e, g_e = p["tokens"], p["experts"], p["global_experts"]
    weights = _weights(e, p["hidden"], p["inter"], dev, bf16=False)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(m, p["hidden"], generator=gen).to(torch.bfloat16).to(dev)
    global_ids = torch.rand(m, g_e, generator=gen).topk(TOP_K, dim=1).indices
    ids = ep_local_ids(global_ids, p["ep_rank"], e).to(dev)
    w = torch.rand(m, TOP_K, generator=gen)
    w = (w / w.sum(1, keepdim=True)).to(dev)
    masked = (ids < 0).all(dim=1)
    layout = prepare_weights(weights)

    def check():
        out = fused_moe_mxfp4(x, weights, w, ids, backend="triton", layout=layout)
        return out, fused_moe_reference(x, weights, w, ids)

    return {"check": check, "masked": masked}


def check_moe_ep(out: torch.Tensor, ref: torch.Tensor, masked: torch.Tensor) -> dict[str, Any]:
    """check_moe, plus: some tokens are fully masked, and their rows are exactly zero."""
    res = check_moe(out, ref)
    n_masked = int(masked.sum())
    rows_zero = bool((out[masked] == 0).all()) if n_masked else False
    res.update(masked_tokens=n_masked, tokens=int(masked.numel()), masked_rows_zero=rows_zero)
    res["ok"] = res["ok"] and n_masked > 0 and rows_zero
    return res


def moe_bf16_case(p: dict[str, Any], fn, seed: int = 0) -> dict[str, Any]:
    """The same routing over bf16 weights (random values; speed only)."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    m, e, h, i = p["tokens"], p["experts"], p["hidden"], p["inter"]
    weights = _weights(e, h, i, dev, bf16=True)
    x = torch.randn(m, h, device=dev).to(torch.bfloat16)
    n_rot = max(1, min(8, -(-e // (m * TOP_K))))
    routes = _routings(m, e, n_rot, dev, seed)
    used = sum(r[0].unique().numel() for r in routes) / len(routes)
    cyc = itertools.cycle(routes)

    def call():
        ids, w = next(cyc)
        return fn(x, weights, w, ids)

    return {"fn": call, "bytes": weight_bytes(p, used, bf16=True), "experts_per_call": used}


def check_moe(out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    """Relative L2 <= 1e-2 (test_gpu_kernels' bound for the fused MoE)."""
    diff = (out.float() - ref.float()).cpu()
    rel = diff.norm().item() / max(ref.float().norm().item(), 1e-30)
    return {"ok": bool(torch.isfinite(out).all()) and rel <= 1e-2, "rel_l2": rel}
