"""The context evaluator's two measurements at lengths transformers' eager model cannot hold
(its dense masked attention needs ~17 GB a layer at 32k): per-position NLL through
`long_attention.forward` (query chunks, the indexer's top-k as served), and the dense attention
mass the indexer's top-k keeps, computed a query chunk at a time. At short lengths both equal
what eval_tiny_glm5_context.py computes through transformers (`--chunked` there; checked by
test/scripts/test_long_eval.py)."""

from __future__ import annotations

import torch
from long_attention import (
    DENSE,
    LongSettings,
    chunks,
    forward,
    index_scores,
    indexer_tensors,
    mla_qkv,
)
from long_rope import cos_sin, softmax_scale


@torch.no_grad()
def position_nll(model, windows: list[torch.Tensor], k: int, chunk: int = 512) -> torch.Tensor:
    """Mean over windows of -log p(token[i+1] | token[:i+1]) at every position i, float64, with
    each query attending to its indexer's top-`k` keys (DENSE: all causal keys)."""
    st = LongSettings(topk=k, chunk=chunk, checkpoint_chunks=False)
    total = None
    for w in windows:
        logits, _ = forward(model, w[:-1], st)
        nll = -torch.log_softmax(logits.double(), -1).gather(1, w[1:].unsqueeze(1)).squeeze(1)
        total = nll if total is None else total + nll
    return total / len(windows)


@torch.no_grad()
def mass_rows(model, window: torch.Tensor, k: int, chunk: int = 512) -> dict[int, dict]:
    """Per layer, per query (float64 [L] each): the head-averaged dense attention mass on the
    indexer's top-k keys (`indexer`) and on the attention's own top-k (`best`), and the share of
    the attention's top-k keys the indexer picks (`overlap`), the model run dense as transformers
    runs it with index_topk above the length."""
    cfg = model.config
    rope = cfg.rope_parameters
    n = window.numel()
    cos, sin = cos_sin(rope, cfg.qk_rope_head_dim, torch.arange(n))
    scale = softmax_scale(rope, cfg.qk_nope_head_dim + cfg.qk_rope_head_dim)
    h = model.model.embed_tokens(window)
    out: dict[int, dict] = {}
    ind = None
    for i, layer in enumerate(model.model.layers[: cfg.num_hidden_layers]):
        attn = layer.self_attn
        x = layer.input_layernorm(h)
        q_resid, q, kk, v = mla_qkv(attn, x, cos, sin)
        if attn.indexer is not None:
            ind = (*indexer_tensors(attn.indexer, x, q_resid, cos, sin), attn.indexer.softmax_scale)
        got, best, overlap = (torch.zeros(n, dtype=torch.float64) for _ in range(3))
        outs = []
        for a, b in chunks(n, chunk):
            causal = torch.arange(b)[None, :] <= torch.arange(a, b)[:, None]
            p = torch.softmax(
                torch.matmul(q[:, a:b] * scale, kk[:, :b].transpose(1, 2)).masked_fill(
                    ~causal, float("-inf")
                ),
                dim=-1,
            )
            outs.append(torch.matmul(p, v[:, :b]).transpose(0, 1))
            mean = p.mean(0).double()
            iq, ik, iw, iscale = ind
            scores = index_scores(iq[a:b], ik[:b], iw[a:b], iscale).masked_fill(
                ~causal, float("-inf")
            )
            top = min(k, b)
            picked = scores.topk(top, dim=-1).indices
            got[a:b] = mean.gather(1, picked).sum(-1)
            heavy = mean.topk(top, dim=-1)
            best[a:b] = heavy.values.sum(-1)
            chosen = torch.zeros(b - a, b, dtype=torch.bool).scatter_(1, picked, True)
            overlap[a:b] = chosen.gather(1, heavy.indices).double().mean(-1)
        out[i] = {"indexer": got, "best": best, "overlap": overlap}
        o = torch.cat(outs).reshape(n, -1)
        h = h + attn.o_proj(o)
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return out


def mass_by_band(model, window: torch.Tensor, k: int, bands, chunk: int = 512) -> dict:
    """eval_tiny_glm5_context.mass_by_band's rows from mass_rows: per layer and band (rows
    with more causal keys than k), the mean mass on the indexer's top-k, the best k keys' and
    k random keys' (k / keys), the share of the attainable gain the indexer captures, and the
    mean overlap of the indexer's top-k with the attention's (k / keys by chance)."""
    rows_by_layer = mass_rows(model, window, k, chunk)
    rand = k / torch.arange(1, window.numel() + 1, dtype=torch.float64)
    out: dict[str, list[dict]] = {}
    for i, m in rows_by_layer.items():
        rows = []
        for a, b in bands:
            a = max(a, k)
            if b > window.numel() or a >= b:
                continue
            g, bb, r, o = (float(x[a:b].mean())
                           for x in (m["indexer"], m["best"], rand, m["overlap"]))  # fmt: skip
            rows.append({"band": [a, b], "indexer": g, "best": bb, "random": r,
                         "captured": (g - r) / (bb - r), "overlap": o})  # fmt: skip
        out[str(i)] = rows
    return out


__all__ = ["DENSE", "mass_by_band", "mass_rows", "position_nll"]
