"""Decode-attention cases of the GPU check: MLA dense and DSA sparse over an FP8 latent cache,
and the DSA indexer, at GLM-5.2 shapes; correctness against the float64 references.

Each timed call reads a different copy of the working set when one copy would sit in L2
(consecutive graph replays rotate through block tables pointing at disjoint pages), so the
times are HBM times, not L2 times.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from plan import DSA_TOP_K, INDEXER_DIM, INDEXER_HEADS, PAGE
from sgl_kernel_rocm.attention import (
    dsa_indexer,
    dsa_indexer_scores,
    dsa_indexer_scores_ref,
    dsa_sparse_decode,
    dsa_sparse_decode_ref,
    mla_decode,
    mla_decode_ref,
    select_topk,
    select_topk_radix,
)
from sgl_kernel_rocm.attention.mla_decode import TILE_VARIANTS

D = 576
# FLOPs per head and key of absorbed MLA: q.k over 512 + 64 dims, then p.v over 512 (x2 for
# multiply-add). At 64 heads that is 64 x 2,176 / 576 = 242 FLOP per FP8 latent byte.
MLA_FLOP_PER_HEAD_KEY = 2 * (D + 512)
L2_BYTES = 64 << 20  # H200 has 50 MB of L2; rotate until a cycle reads at least 4x that
FP8 = torch.float8_e4m3fn


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _copies(ws_bytes: int) -> int:
    return max(1, min(32, -(-4 * L2_BYTES // max(1, ws_bytes)))) if torch.cuda.is_available() else 1


def _paged(batch: int, ctx: int, width: int, dtype, copies: int, seed: int):
    """A pool with `copies` disjoint page sets for batch x ctx tokens; block tables per copy."""
    dev = _device()
    g = torch.Generator(device="cpu").manual_seed(seed)
    page = PAGE if ctx >= PAGE else 16
    pages = -(-ctx // page)
    total = copies * batch * pages
    pool = torch.empty(total, page, width, device=dev, dtype=torch.bfloat16)
    pool.normal_(0, 1, generator=None)
    pool = (pool * 4).to(dtype) if dtype == FP8 else pool.to(dtype)
    perm = torch.randperm(total, generator=g).to(dev, torch.int32)
    tables = [perm[i * batch * pages : (i + 1) * batch * pages].view(batch, pages)
              for i in range(copies)]  # fmt: skip
    seq = torch.full((batch,), ctx, dtype=torch.int32, device=dev)
    return pool, tables, seq


def _rotating(fn_for_table, tables):
    cyc = itertools.cycle(tables)
    return lambda: fn_for_table(next(cyc))


def mla_case(p: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """Returns {'fn': timed callable, 'bytes': HBM bytes per call, ...} for kind mla/dsa."""
    b, ctx, heads = p["batch"], p["ctx"], p["heads"]
    sparse = p.get("kind") == "dsa"
    keys = min(p["top_k"], ctx) if sparse else ctx
    ws = b * keys * D  # FP8 latent bytes one call reads (unique keys)
    pool, tables, seq = _paged(b, ctx, D, FP8, _copies(ws), seed)
    dev = pool.device
    q = torch.randn(b, heads, D, device=dev).to(torch.bfloat16)
    scale = torch.tensor(0.25, device=dev)
    out = torch.empty(b, heads, 512, device=dev, dtype=torch.bfloat16)
    tile = TILE_VARIANTS[p.get("variant", "table")]  # the table's pick, or a named variant
    if sparse:
        g = torch.Generator(device="cpu").manual_seed(seed + 1)
        idx = torch.stack([torch.randperm(ctx, generator=g)[:keys] for _ in range(b)])
        idx = idx.to(dev, torch.int32)

        def call(bt):
            return dsa_sparse_decode(q, pool, bt, seq, idx, kv_scale=scale, out=out,
                                     max_seq_len=ctx, tile_config=tile)  # fmt: skip

        ref = lambda: dsa_sparse_decode_ref(q[:2], pool, tables[0][:2], seq[:2], idx[:2],  # noqa: E731
                                            kv_scale=scale)  # fmt: skip
    else:
        idx = None

        def call(bt):
            return mla_decode(
                q, pool, bt, seq, kv_scale=scale, out=out, max_seq_len=ctx, tile_config=tile
            )

        ref = lambda: mla_decode_ref(q[:2], pool, tables[0][:2], seq[:2], kv_scale=scale)  # noqa: E731
    nbytes = ws + q.numel() * 2 + out.numel() * 2 + (idx.numel() * 4 if sparse else 0)
    return {"fn": _rotating(call, tables), "bytes": nbytes, "copies": len(tables),
            "flops": b * heads * keys * MLA_FLOP_PER_HEAD_KEY,
            "check": lambda: (call(tables[0])[:2], ref())}  # fmt: skip


def indexer_case(p: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """kind indexer (scores + top-k), indexer_scores (the score kernel alone) or indexer_topk
    (torch top-k alone, over scores made once): the three times that locate the indexer's
    cost."""
    b, ctx, kind = p["batch"], p["ctx"], p.get("kind", "indexer")
    ws = b * ctx * (INDEXER_DIM + 4)  # FP8 key + fp32 scale per token
    pool, tables, seq = _paged(b, ctx, INDEXER_DIM, FP8, _copies(ws), seed)
    dev = pool.device
    k_scale = torch.rand(pool.shape[:2], device=dev) + 0.05
    q = torch.randn(b, INDEXER_HEADS, INDEXER_DIM, device=dev).to(torch.bfloat16)
    w = torch.randn(b, INDEXER_HEADS, device=dev) * INDEXER_DIM**-0.5
    top_k = min(p.get("top_k", DSA_TOP_K), ctx)
    flops = b * ctx * INDEXER_HEADS * 2 * INDEXER_DIM

    def full(bt):
        return dsa_indexer(q, w, pool, k_scale, bt, seq, top_k=top_k, max_seq_len=ctx)

    def scores(bt):
        return dsa_indexer_scores(q, w, pool, k_scale, bt, seq, ctx)

    def check():
        got = dsa_indexer_scores(q[:2], w[:2], pool, k_scale, tables[0][:2], seq[:2], ctx)
        return got, dsa_indexer_scores_ref(q[:2].cpu(), w[:2].cpu(), pool.cpu(), k_scale.cpu(),
                                           tables[0][:2].cpu(), seq[:2].cpu())  # fmt: skip

    score_bytes = b * ctx * 4
    if kind in ("indexer_topk", "indexer_topk_radix"):  # reads the fp32 scores, writes indices
        made = scores(tables[0])
        select = select_topk_radix if kind == "indexer_topk_radix" else select_topk
        extra = {"selection_ok": same_selection(made, select(made, seq, top_k), top_k)}
        return {"fn": lambda: select(made, seq, top_k), "bytes": score_bytes + b * top_k * 4,
                "copies": 1, "flops": 0, "check": check, "extra": extra}  # fmt: skip
    if kind == "indexer_scores":  # reads keys + scales, writes the fp32 scores
        nbytes = ws + q.numel() * 2 + score_bytes
        return {"fn": _rotating(scores, tables), "bytes": nbytes, "copies": len(tables),
                "flops": flops, "check": check}  # fmt: skip
    nbytes = ws + q.numel() * 2 + b * top_k * 4
    return {"fn": _rotating(full, tables), "bytes": nbytes, "copies": len(tables),
            "flops": flops, "check": check}  # fmt: skip


def same_selection(scores: torch.Tensor, idx: torch.Tensor, top_k: int) -> bool:
    """The chosen positions' scores are torch.topk's values (as multisets, row by row; -1 for
    a missing one), so a select may order or break ties differently but not pick worse."""
    want = torch.topk(scores, min(top_k, scores.shape[1]), dim=1).values
    got = torch.where(idx >= 0, scores.gather(1, idx.long().clamp(min=0)), float("-inf"))
    got = got.sort(dim=1, descending=True).values[:, : want.shape[1]]
    return bool(torch.equal(got, want))


def check_attention(out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    """One bf16 ulp of the largest value plus relative L2 <= 1e-2 (test_gpu_kernels' bound)."""
    out, ref = out.double().cpu(), ref.double().cpu()
    tol = 2.0**-7 * ref.abs().max().item() + 1e-4
    err = (out - ref).abs().max().item()
    rel = (out - ref).norm().item() / max(ref.norm().item(), 1e-30)
    return {"ok": err <= tol and rel <= 1e-2, "max_abs_err": err, "tol": tol, "rel_l2": rel}


def check_scores(out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    out, ref = out.double().cpu()[:, : ref.shape[1]], ref.double().cpu()
    fin = torch.isfinite(ref)
    same_pad = bool(torch.equal(torch.isinf(out), torch.isinf(ref)))
    atol = max(1e-4, 1e-5 * ref[fin].abs().max().item())
    err = (out[fin] - ref[fin]).abs().max().item()
    return {"ok": same_pad and err <= atol + 1e-5 * ref[fin].abs().max().item(),
            "max_abs_err": err, "tol": atol, "padding_ok": same_pad}  # fmt: skip
