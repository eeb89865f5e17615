"""References for checking the DSA indexer's selections: transformers-side views of
GlmMoeDsaForCausalLM's indexer, and the top-k re-derived from the index-key format.

- `reference_topk`: the top-k each full-indexer layer of transformers selects (forward hooks).
- `forced_selection`: transformers' forward with every indexer returning given top-k rows (the
  served ones): with the same selections, served and reference must agree to float32 noise.
- `fp8_index_keys`: transformers' indexer with its keys rotated and quantized to FP8 e4m3 the
  way SGLang's index-key pool holds them (sglang_mx.attention.dsa.index_k_pages, checked against
  SGLang's own writer in test_dsa_pool_layout): the effect of FP8 index keys on this model.
- The top-k re-derived from the index-key format, for judging a served or kernel selection with
  none of the product's code: `fp8_index_key` rounds keys to FP8 e4m3 with the per-token
  power-of-two scale of SGLang's index-key pages, from the format's definition (not through
  index_k_pages or torch's float8 cast), `fp8_index_key_pages` writes them as pages for a
  kernel; `IndexKeyHistory` keeps each layer's keys by position across calls; `format_scores`
  is score = sum_h w_h relu(q_h . k) in float64, causal; `selection_overlap` is how much of a
  selection the reference accepts; `latest_keys` is the planted wrong indexer (each query's
  newest k keys) the overlap must reject.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from sglang_mx.attention.dsa import hadamard, index_k_pages


def _indexer_cls():
    from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as m

    return m, m.GlmMoeDsaIndexer


@torch.no_grad()
def reference_topk(model, ids: list[int]) -> dict[int, torch.Tensor]:
    """layer -> transformers' top-k [S, K] for each full-indexer layer."""
    out: dict[int, torch.Tensor] = {}
    hooks = []
    for i, layer in enumerate(model.model.layers):
        indexer = getattr(layer.self_attn, "indexer", None)
        if indexer is not None:
            hooks.append(
                indexer.register_forward_hook(
                    lambda mod, a, o, i=i: out.__setitem__(i, o[0].detach().clone())
                )
            )
    try:
        model(torch.tensor([ids]))
    finally:
        for h in hooks:
            h.remove()
    return out


@contextlib.contextmanager
def forced_selection(rows: dict[int, dict[int, torch.Tensor]]) -> Iterator[None]:
    """Every full indexer returns rows[layer][position] (-1 entries -> position 0, which every
    causal row holds anyway) instead of its own choice."""
    _, cls = _indexer_cls()
    original = cls.forward

    def forward(self, hidden_states, *args, **kwargs):
        chosen = rows[self.layer_idx]
        forced = torch.stack([chosen[p] for p in range(hidden_states.shape[1])]).long()
        return forced.clamp_min(0).unsqueeze(0).to(torch.int32)

    cls.forward = forward
    try:
        yield
    finally:
        cls.forward = original


@contextlib.contextmanager
def fp8_index_keys() -> Iterator[None]:
    """transformers' indexer scoring FP8 keys (Hadamard-rotated, one power-of-two scale each)."""
    m, cls = _indexer_cls()
    original = cls.forward

    def forward(self, hidden_states, q_resid, position_embeddings, attention_mask, *a, **k):
        b, s, _ = hidden_states.shape
        cos, sin = position_embeddings
        rope, rest = self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim
        q = self.wq_b(q_resid).view(b, s, self.n_heads, self.head_dim)
        q_rot, q_pass = torch.split(q, [rope, rest], dim=-1)
        key = self.k_norm(self.wk(hidden_states)).unsqueeze(2)
        k_rot, k_pass = torch.split(key, [rope, rest], dim=-1)
        q_rot, k_rot = m.apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
        q = hadamard.rotate(torch.cat([q_rot, q_pass], dim=-1))
        key = hadamard.rotate(torch.cat([k_rot, k_pass], dim=-1).squeeze(2))
        k_fp8, k_scale = index_k_pages.quantize(key)
        key = k_fp8.float() * k_scale.unsqueeze(-1)
        scores = F.relu(q.float() @ key.transpose(-1, -2).unsqueeze(1)) * self.softmax_scale
        w = self.weights_proj(hidden_states).float() * self.n_heads**-0.5
        index = (w.unsqueeze(-2) @ scores).squeeze(-2)
        if attention_mask.dtype == torch.bool:
            index = index.masked_fill(~attention_mask, float("-inf"))
        else:
            index = index + attention_mask
        return index.topk(min(self.index_topk, s), dim=-1).indices.to(torch.int32)

    cls.forward = forward
    try:
        yield
    finally:
        cls.forward = original


# --- The choice re-derived from the index-key format -------------------------------------------

E4M3_MAX = 448.0  # OCP FP8 e4m3fn: 4 exponent bits (bias 7), 3 mantissa bits, no infinities
E4M3_MANTISSA_BITS = 3
E4M3_MIN_EXP = -6  # the smallest normal exponent; below it the step stays 2**-9 (subnormals)
SCALE_AMAX_FLOOR = 1e-4  # SGLang's act_quant floors a row's amax before its ue8m0 scale


def e4m3(x: torch.Tensor) -> torch.Tensor:
    """x (|x| <= 448) rounded to the nearest FP8 e4m3 value, ties to even, in float64: the
    format's grid has 8 steps per binade, step 2**(e - 3) for |x| in [2**e, 2**(e + 1))."""
    x = x.double()
    if bool((x.abs() > E4M3_MAX).any()):
        raise ValueError("e4m3 takes values the scale already brought within +-448")
    _, exp = torch.frexp(x)  # |x| = m * 2**exp with m in [0.5, 1): the binade is exp - 1
    binade = (exp - 1).clamp_min(E4M3_MIN_EXP)
    step = torch.exp2((binade - E4M3_MANTISSA_BITS).double())
    return torch.round(x / step) * step  # torch.round: half to even; |x| <= 448 stays in range


def index_key_scale(key: torch.Tensor) -> torch.Tensor:
    """Each token's scale [L] (float64): the smallest power of two s with amax / s <= 448, amax
    floored at 1e-4 (SGLang's act_quant with ue8m0 scales, one 128-wide block per key)."""
    m, e = torch.frexp(key.double().abs().amax(dim=-1).clamp_min(SCALE_AMAX_FLOOR) / E4M3_MAX)
    return torch.exp2(torch.where(m == 0.5, e - 1, e).double())  # m == 0.5: a power of two


def fp8_index_key(key: torch.Tensor) -> torch.Tensor:
    """Keys [L, D] as the index-key pages hold them, dequantized (float64): each token divided
    by its scale, rounded to e4m3, times the scale."""
    scale = index_key_scale(key).unsqueeze(-1)
    return e4m3((key.double() / scale).clamp(-E4M3_MAX, E4M3_MAX)) * scale


def fp8_index_key_pages(
    key: torch.Tensor, slots: torch.Tensor, num_pages: int, page: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys [L, D] written at token slots [L] of a paged pool by the format's definition: e4m3
    values [num_pages, page, D] (float8_e4m3fn holding `e4m3`'s values, so the cast is exact)
    and fp32 scales [num_pages, page]; other slots zero. The paged form Triton kernels read."""
    scale = index_key_scale(key)
    values = e4m3((key.double() / scale.unsqueeze(-1)).clamp(-E4M3_MAX, E4M3_MAX))
    keys = torch.zeros(num_pages * page, key.shape[-1], dtype=torch.float8_e4m3fn)
    scales = torch.zeros(num_pages * page)
    keys[slots.long()] = values.to(torch.float8_e4m3fn)
    scales[slots.long()] = scale.float()
    return keys.view(num_pages, page, -1), scales.view(num_pages, page)


class IndexKeyHistory:
    """Each indexer layer's FP8 keys by position, written call by call as the served indexer
    writes them: a request's keys at a position replace an earlier request's (a radix hit's
    prefix keeps the keys the first prompt wrote there, the same tokens' keys)."""

    def __init__(self) -> None:
        self.keys: dict[int, torch.Tensor] = {}
        self.written: dict[int, torch.Tensor] = {}

    def write(self, layer: int, positions: torch.Tensor, key: torch.Tensor) -> None:
        held = self.keys.get(layer, torch.empty(0, key.shape[-1], dtype=torch.float64))
        seen = self.written.get(layer, torch.empty(0, dtype=torch.bool))
        grow = int(positions.max()) + 1 - held.shape[0]
        if grow > 0:
            held = torch.cat([held, held.new_zeros(grow, key.shape[-1])])
            seen = torch.cat([seen, seen.new_zeros(grow)])
        held[positions.long()] = fp8_index_key(key)
        seen[positions.long()] = True
        self.keys[layer], self.written[layer] = held, seen

    def upto(self, layer: int, last: int) -> torch.Tensor:
        """The layer's keys at positions 0..last [last + 1, D]; every one must have been written
        (a missing call in the dump is an error, not a zero key)."""
        seen = self.written.get(layer, torch.empty(0, dtype=torch.bool))[: last + 1]
        if seen.numel() <= last or not bool(seen.all()):
            missing = (~seen).nonzero().flatten()[:5].tolist() if seen.numel() else [0]
            raise ValueError(f"layer {layer}: no key written at positions {missing} (of 0..{last})")
        return self.keys[layer][: last + 1]


def format_scores(
    query: torch.Tensor, weights: torch.Tensor, keys: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    """score[t, j] = sum_h weights[t, h] * relu(query[t, h] . keys[j]) in float64 [T, L], -inf
    for keys past each query's position (weights hold the head gate and scales as dumped)."""
    dots = torch.relu(torch.einsum("thd,ld->thl", query.double(), keys.double()))
    score = torch.einsum("thl,th->tl", dots, weights.double())
    future = torch.arange(keys.shape[0])[None, :] > positions.long()[:, None]
    return score.masked_fill(future, float("-inf"))


def selection_overlap(selected: torch.Tensor, scores: torch.Tensor, k: int) -> torch.Tensor:
    """Per row, the fraction of the k selected keys [T, k] (-1: none; rows of distinct keys,
    checked apart) that the reference top-k accepts: a causal key scoring at least the k-th best
    (so keys tied with it count either way); float64 [T]."""
    kth = scores.topk(k, dim=1).values[:, -1:]
    valid = (selected >= 0) & (selected < scores.shape[1])
    chosen = scores.gather(1, selected.long().clamp(0, scores.shape[1] - 1))
    return ((chosen >= kth) & torch.isfinite(chosen) & valid).sum(1).double() / k


def latest_keys(positions: torch.Tensor, k: int) -> torch.Tensor:
    """The planted wrong indexer: each query's newest k keys [T, k] (-1 before position 0)."""
    rows = positions.long()[:, None] - torch.arange(k)[None, :]
    return rows.clamp_min(-1)
