"""The tiny GLM-5 model's forward at long sequence lengths, chunked and sparse as served: what
`train_tiny_glm5_long.py` trains through, computing what transformers' `GlmMoeDsaForCausalLM`
computes (eager, indexer active) without ever holding an L x L matrix.

Per layer, queries go in chunks of `chunk`. The indexer scores a chunk against every causal key
([chunk, L] after its head sum) and keeps each query's top-k under no_grad, from detached inputs
(DeepSeek-V3.2's sparse stage); "shared" layers reuse the previous full layer's selection, as
GLM-5.2 does. The main attention of a chunk then runs on the union of its queries' selected keys
(all causal keys where that union is most of them), masked to each query's own top-k and to
causality, under activation checkpointing so only one chunk's scores live at a time.

With `indexer_loss`, each chunk also returns KL(main attention, mean over heads, detached ||
softmax of the indexer's scores) over the keys the query attends: DeepSeek-V3.2's indexer loss,
on the selected keys when sparse, on all causal keys when dense (its warm-up stage). Only the
indexer's weights get gradients from it. RoPE is `long_rope`'s, i.e. what SGLang serves.
Batch size 1: a long sequence is the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from long_rope import cos_sin, rotate_interleaved, softmax_scale
from torch.utils.checkpoint import checkpoint

DENSE = 1 << 30  # a top-k above any length: every causal key is attended


@dataclass(frozen=True)
class LongSettings:
    topk: int = 2048  # keys per query (DENSE: dense attention)
    chunk: int = 512  # queries per chunk
    union_share: float = 0.75  # gather the chunk's selected keys when under this share of all
    checkpoint_layers: bool = False  # also recompute each layer body in backward
    indexer_loss: bool = False  # return the indexer's KL to the main attention
    shared_kl: bool = True  # ...of "shared" layers too (else only the layer that owns the indexer)
    checkpoint_chunks: bool = True  # recompute each chunk's scores in backward (long sequences)
    grad_from: int = 0  # rows before this (a multiple of chunk) run without grad: see forward()


@dataclass
class Indexed:
    """One full layer's indexer tensors (queries [L, nh, hd], keys [L, hd], head weights [L, nh],
    with gradients to the indexer's weights only) and its per-chunk selection."""

    q: torch.Tensor
    k: torch.Tensor
    w: torch.Tensor
    scale: float
    selection: list[torch.Tensor | None]  # per chunk [C, topk] key positions; None: all causal


def index_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    """[C, U] = sum_h w[c, h] * relu(q[c, h] . k[u] * scale), float32 (the indexer's ranking)."""
    # transformers' op order, so near-ties rank the same
    s = torch.relu(torch.matmul(q.float(), k.float().t()) * scale)
    return torch.matmul(w.unsqueeze(1), s).squeeze(1)


def indexer_tensors(indexer, x: torch.Tensor, q_resid: torch.Tensor, cos, sin):
    """The indexer's rotated queries and keys and its head weights (x, q_resid detached)."""
    n, rope = x.shape[0], indexer.qk_rope_head_dim
    q = indexer.wq_b(q_resid).view(n, indexer.n_heads, indexer.head_dim)
    q = torch.cat([rotate_interleaved(q[..., :rope], cos, sin), q[..., rope:]], dim=-1)
    k = indexer.k_norm(indexer.wk(x))
    k = torch.cat([rotate_interleaved(k[:, :rope], cos, sin), k[:, rope:]], dim=-1)
    w = indexer.weights_proj(x.to(indexer.weights_proj.weight.dtype)).float()
    return q, k, w * indexer.n_heads**-0.5


def chunks(n: int, chunk: int):
    return [(a, min(a + chunk, n)) for a in range(0, n, chunk)]


@torch.no_grad()
def select(q, k, w, scale: float, topk: int, chunk: int) -> list[torch.Tensor | None]:
    """Per query chunk, each query's top-k keys by index score among its causal keys (queries
    with fewer causal keys than k get them all: their extra picks are masked future keys)."""
    n = q.shape[0]
    out: list[torch.Tensor | None] = []
    for a, b in chunks(n, chunk):
        if b <= topk:
            out.append(None)
            continue
        # Rows as long as the sequence, future keys -inf, as transformers ranks them: torch.topk
        # then breaks the indexer's exact ties (relu zeros are common) the same way.
        s = torch.full((b - a, n), float("-inf"))
        s[:, :b] = index_scores(q[a:b], k[:b], w[a:b], scale)
        future = torch.arange(b)[None, :] > torch.arange(a, b)[:, None]
        s[:, :b].masked_fill_(future, float("-inf"))
        out.append(s.topk(topk, dim=-1).indices)
    return out


def chunk_keys(sel: torch.Tensor | None, a: int, b: int, union_share: float):
    """(key positions [U] or None for 0..b-1, mask [C, U]: attended = selected and causal)."""
    qpos = torch.arange(a, b)[:, None]
    if sel is None:
        return None, torch.arange(b)[None, :] <= qpos
    # Picks past the chunk's last key are future keys of a query with fewer causal keys than
    # k (all of which it has picked): moved onto key b - 1, which causality masks or it has.
    sel = sel.clamp_max(b - 1)
    keys = torch.unique(sel)
    if keys.numel() > union_share * b:
        keys, slot = None, sel
        mask = torch.zeros(b - a, b, dtype=torch.bool)
        pos = torch.arange(b)
    else:
        slot = torch.searchsorted(keys, sel)
        mask = torch.zeros(b - a, keys.numel(), dtype=torch.bool)
        pos = keys
    mask.scatter_(1, slot, True)
    return keys, mask & (pos[None, :] <= qpos)


def _take(t: torch.Tensor, keys: torch.Tensor | None, b: int, dim: int) -> torch.Tensor:
    return t.narrow(dim, 0, b) if keys is None else t.index_select(dim, keys)


def attend_chunk(q, k, v, keys, mask, scale, iq=None, ik=None, iw=None, iscale=0.0, qw=None):
    """One chunk's sparse attention: q [H, C, D], k [H, L, D], v [H, L, Dv] -> [C, H, Dv], and
    the indexer's KL summed over the chunk's queries (0 without iq), each query's weighted by
    `qw` [C] where given."""
    b = mask.shape[1] if keys is None else 0
    kk, vv = _take(k, keys, b, 1), _take(v, keys, b, 1)
    s = torch.matmul(q * scale, kk.transpose(1, 2))
    p = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
    out = torch.matmul(p, vv).transpose(0, 1)
    if iq is None:
        return out, out.new_zeros(())
    target = p.detach().mean(0)
    logit = index_scores(iq, _take(ik, keys, b, 0), iw, iscale).masked_fill(~mask, float("-inf"))
    logq = torch.log_softmax(logit, dim=-1).masked_fill(~mask, 0.0)
    kl = (target * (torch.log(target.clamp_min(1e-12)) - logq)).sum(-1)
    return out, (kl if qw is None else kl * qw).sum()


def mla_qkv(attn, x: torch.Tensor, cos, sin):
    """MLA (transformers' GlmMoeDsaAttention, expanded form): q_resid [L, q_lora] and
    q [H, L, D], k [H, L, D], v [H, L, Dv]."""
    n, h, nope = x.shape[0], attn.num_heads, attn.qk_nope_head_dim
    q_resid = attn.q_a_layernorm(attn.q_a_proj(x))
    q = attn.q_b_proj(q_resid).view(n, h, attn.qk_head_dim)
    q = torch.cat([q[..., :nope], rotate_interleaved(q[..., nope:], cos, sin)], dim=-1)
    ckv = attn.kv_a_proj_with_mqa(x)
    latent = attn.kv_a_layernorm(ckv[:, : attn.kv_lora_rank])
    k_rot = rotate_interleaved(ckv[:, attn.kv_lora_rank :], cos, sin)
    kv = attn.kv_b_proj(latent).view(n, h, nope + attn.v_head_dim)
    k = torch.cat([kv[..., :nope], k_rot[:, None, :].expand(n, h, k_rot.shape[-1])], dim=-1)
    return q_resid, q.transpose(0, 1), k.transpose(0, 1), kv[..., nope:].transpose(0, 1)


def _after_attention(layer, h: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    h = h + layer.self_attn.o_proj(o)
    return h + layer.mlp(layer.post_attention_layernorm(h))


def layer_body(layer, h, cos, sin, ind: Indexed, st: LongSettings, scale: float, qw=None):
    """One decoder layer on h [L, hidden] attending through `ind`'s selection: (h', KL sum,
    each query's weighted by `qw` [L] where given). Rows before `st.grad_from` enter detached and
    their queries run without grad; their keys and values keep the projections' gradients."""
    attn, tail = layer.self_attn, st.grad_from
    if tail:
        h = torch.cat([h[:tail].detach(), h[tail:]])
    _, q, k, v = mla_qkv(attn, layer.input_layernorm(h), cos, sin)
    outs, kl = [], h.new_zeros(())
    kl_here = st.indexer_loss and (st.shared_kl or attn.indexer is not None)
    for (a, b), sel in zip(chunks(h.shape[0], st.chunk), ind.selection, strict=True):
        keys, mask = chunk_keys(sel, a, b, st.union_share)
        if b <= tail:
            with torch.no_grad():
                outs.append(attend_chunk(q[:, a:b], k, v, keys, mask, scale)[0])
            continue
        extra = (ind.q[a:b], ind.k, ind.w[a:b], ind.scale, _rows(qw, a, b)) if kl_here else ()
        args = (q[:, a:b], k, v, keys, mask, scale, *extra)
        if st.checkpoint_chunks:
            o, c = checkpoint(attend_chunk, *args, use_reentrant=False)
        else:
            o, c = attend_chunk(*args)
        outs.append(o)
        kl = kl + c
    o = torch.cat(outs).reshape(h.shape[0], -1)
    if not tail:
        return _after_attention(layer, h, o), kl
    with torch.no_grad():
        head = _after_attention(layer, h[:tail], o[:tail])
    return torch.cat([head, _after_attention(layer, h[tail:], o[tail:])]), kl


def _rows(t: torch.Tensor | None, a: int, b: int) -> torch.Tensor | None:
    return None if t is None else t[a:b]


def forward(model, ids: torch.Tensor, st: LongSettings, query_weight: torch.Tensor | None = None,
            selections: list | None = None, positions: torch.Tensor | None = None):  # fmt: skip
    """Logits [L, vocab] for token ids [L], and the indexer KL (mean over queries and layers;
    0 unless st.indexer_loss). `query_weight` [L] weighs each query's KL (the mean becomes the
    weighted mean): the few queries that must reach far back can outweigh the many that need
    not. `selections`, where given, gets each indexer's per-chunk selection (select()'s list).
    `positions` [L] (increasing; default 0..L-1) are the RoPE positions, for positional skips
    (PoSE: long distances from a short sequence); causality stays by index.

    `st.grad_from` > 0 trains only the tail: the logits are the same, but rows before it carry no
    gradient (their logits, their indexer KL, and the paths through their attention and MLP are
    cut; the tail still reads their keys and values through live projections). A 32k sequence
    then costs a no-grad forward plus a backward over the last few chunks, not a full backward
    over 64 checkpointed chunks: far reads trained at a fraction of the cost."""
    cfg = model.config
    if st.grad_from % st.chunk or not 0 <= st.grad_from < ids.numel():
        raise ValueError(f"grad_from {st.grad_from}: a multiple of chunk {st.chunk} under "
                         f"the length {ids.numel()}")  # fmt: skip
    rope = cfg.rope_parameters
    if positions is None:
        positions = torch.arange(ids.numel())
    cos, sin = cos_sin(rope, cfg.qk_rope_head_dim, positions)
    scale = softmax_scale(rope, cfg.qk_nope_head_dim + cfg.qk_rope_head_dim)
    h = model.model.embed_tokens(ids)
    ind, kl = None, h.new_zeros(())
    for layer in model.model.layers[: cfg.num_hidden_layers]:
        attn = layer.self_attn
        if attn.indexer is not None:
            with torch.no_grad():  # the indexer's input, detached
                x = layer.input_layernorm(h)
                q_resid = attn.q_a_layernorm(attn.q_a_proj(x))
            iq, ik, iw = indexer_tensors(attn.indexer, x, q_resid, cos, sin)
            iscale = attn.indexer.softmax_scale
            sel = select(iq, ik, iw, iscale, st.topk, st.chunk)
            if selections is not None:
                selections.append(sel)
            ind = Indexed(iq, ik, iw, iscale, sel)
        if st.checkpoint_layers:
            h, c = checkpoint(layer_body, layer, h, cos, sin, ind, st, scale, query_weight,
                              use_reentrant=False)  # fmt: skip
        else:
            h, c = layer_body(layer, h, cos, sin, ind, st, scale, query_weight)
        kl = kl + c
    logits = model.lm_head(model.model.norm(h))
    owners = sum(x.self_attn.indexer is not None for x in model.model.layers)
    layers = cfg.num_hidden_layers if st.shared_kl else owners
    tail = slice(st.grad_from, None)
    queries = ids[tail].numel() if query_weight is None else float(query_weight[tail].sum())
    return logits, kl / (queries * layers)
