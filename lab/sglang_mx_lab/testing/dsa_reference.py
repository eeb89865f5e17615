"""The DSA indexer of transformers' `GlmMoeDsaForCausalLM`, seen from outside: differentiable
index scores (transformers' own forward is no-grad, it returns only top-k indices), a switch
between sparse and dense attention, capture of the indexer's inputs and of the layers' attention
probabilities, and the top-k attention-mass measure the trainer, evaluator and tests share."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

# index_topk larger than any context: every causal key is selected, i.e. dense attention.
DENSE = 1 << 30


def indexer_layers(model) -> list[int]:
    """Layers that run their own indexer ("full"); the others reuse the previous full one's."""
    return [i for i, layer in enumerate(model.model.layers) if layer.self_attn.indexer is not None]


def indexer_groups(model) -> dict[int, list[int]]:
    """Full layer -> itself plus the "shared" layers that attend through its top-k."""
    groups: dict[int, list[int]] = {}
    owner = None
    for i, layer in enumerate(model.model.layers):
        if layer.self_attn.indexer is not None:
            owner = i
            groups[i] = [i]
        elif owner is not None:
            groups[owner].append(i)
    return groups


def set_index_topk(model, k: int) -> None:
    """Top-k every indexer selects from now on (DENSE: all keys, so attention is dense)."""
    for i in indexer_layers(model):
        model.model.layers[i].self_attn.indexer.index_topk = k


def index_scores(indexer, hidden: torch.Tensor, q_resid: torch.Tensor, cos, sin) -> torch.Tensor:
    """[B, S, T] scores the indexer ranks keys by, with gradients, before the causal mask.

    Same math as transformers' GlmMoeDsaIndexer.forward (interleaved RoPE on the first
    qk_rope_head_dim dims, relu(q.k) per head weighted by weights_proj)."""
    from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import (
        apply_rotary_pos_emb_interleave,
    )

    b, s, _ = hidden.shape
    rope = indexer.qk_rope_head_dim
    q = indexer.wq_b(q_resid).view(b, s, indexer.n_heads, indexer.head_dim)
    k = indexer.k_norm(indexer.wk(hidden)).unsqueeze(2)
    q_rot, k_rot = apply_rotary_pos_emb_interleave(q[..., :rope], k[..., :rope], cos, sin, None, 2)
    q = torch.cat([q_rot, q[..., rope:]], dim=-1).float()
    k = torch.cat([k_rot, k[..., rope:]], dim=-1).squeeze(2).float()
    scores = torch.relu(torch.einsum("bshd,btd->bsht", q, k) * indexer.softmax_scale)
    weights = indexer.weights_proj(hidden.to(indexer.weights_proj.weight.dtype)).float()
    return torch.einsum("bsh,bsht->bst", weights * indexer.n_heads**-0.5, scores)


@dataclass
class Capture:
    """What one forward left behind: indexer inputs per full layer, head-averaged attention
    probabilities [B, S, T] per layer (eager attention only)."""

    indexer_inputs: dict[int, tuple] = field(default_factory=dict)
    attention: dict[int, torch.Tensor] = field(default_factory=dict)


@contextmanager
def capture(model, attention: bool = True):
    """Record indexer inputs (detached) and, if asked, each layer's head-averaged attention."""
    cap = Capture()
    handles = []
    for i, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        if attn.indexer is not None:

            def pre(_mod, args, kwargs, i=i):
                hidden, q_resid, (cos, sin) = args[0], args[1], args[2]
                cap.indexer_inputs[i] = (
                    hidden.detach(),
                    q_resid.detach(),
                    cos.detach(),
                    sin.detach(),
                )

            handles.append(attn.indexer.register_forward_pre_hook(pre, with_kwargs=True))
        if attention:

            def post(_mod, _args, out, i=i):
                if out[1] is None:
                    raise RuntimeError("attention probabilities need attn_implementation='eager'")
                cap.attention[i] = out[1].detach().float().mean(dim=1)

            handles.append(attn.register_forward_hook(post))
    try:
        yield cap
    finally:
        for h in handles:
            h.remove()


def causal_mask(s: int, device=None) -> torch.Tensor:
    """[S, S] bool, True where key t <= query s."""
    return torch.ones(s, s, dtype=torch.bool, device=device).tril()


def indexer_kl(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """KL(target || softmax(scores)) over causal keys, mean over queries and batch."""
    mask = causal_mask(scores.shape[-1], scores.device)
    logq = torch.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    p = target.masked_fill(~mask, 0.0)
    logp = torch.log(p.clamp_min(1e-12))
    kl = (p * (logp - logq.masked_fill(~mask, 0.0))).sum(-1)
    return kl.mean()


@dataclass(frozen=True)
class TopkMass:
    """Dense attention mass (averaged over queries with more than k causal keys) held by the
    indexer's top-k keys, by the attention's own top-k (the most any k keys hold), and by k
    keys picked at random (k / number of causal keys, what a useless indexer gets)."""

    indexer: float
    best: float
    random: float

    @property
    def captured(self) -> float:
        """Share of the attainable gain over random the indexer achieves (1 = optimal)."""
        return (self.indexer - self.random) / (self.best - self.random)


@torch.no_grad()
def topk_mass(scores: torch.Tensor, attention: torch.Tensor, k: int) -> TopkMass:
    s = scores.shape[-1]
    if s <= k:
        raise ValueError(f"need more than k={k} keys per query, got sequence length {s}")
    mask = causal_mask(s, scores.device)
    picked = scores.masked_fill(~mask, float("-inf")).topk(k, dim=-1).indices
    attention = attention.masked_fill(~mask, 0.0)
    got = attention.gather(-1, picked).sum(-1)
    best = attention.topk(k, dim=-1).values.sum(-1)
    rows = slice(k, None)  # queries at positions >= k see k+1 or more keys
    random = k / torch.arange(k + 1, s + 1, dtype=torch.float64)
    return TopkMass(float(got[:, rows].mean()), float(best[:, rows].mean()), float(random.mean()))


@torch.no_grad()
def layer_topk_mass(model, input_ids: torch.Tensor, k: int) -> dict[int, TopkMass]:
    """Per layer: the top-k mass of the indexer it attends through, against its own dense
    attention. The model must use eager attention; it runs dense here."""
    set_index_topk(model, DENSE)
    try:
        with capture(model) as cap:
            model(input_ids=input_ids, use_cache=False)
    finally:
        set_index_topk(model, k)
    out = {}
    for owner, members in indexer_groups(model).items():
        hidden, q_resid, cos, sin = cap.indexer_inputs[owner]
        scores = index_scores(
            model.model.layers[owner].self_attn.indexer, hidden, q_resid, cos, sin
        )
        for i in members:
            out[i] = topk_mass(scores, cap.attention[i], k)
    return out
