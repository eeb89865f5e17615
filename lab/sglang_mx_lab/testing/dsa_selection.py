"""transformers-side views of GlmMoeDsaForCausalLM's DSA indexer, for checking served selections.

- `reference_topk`: the top-k each full-indexer layer of transformers selects (forward hooks).
- `forced_selection`: transformers' forward with every indexer returning given top-k rows (the
  served ones): with the same selections, served and reference must agree to float32 noise.
- `fp8_index_keys`: transformers' indexer with its keys rotated and quantized to FP8 e4m3 the
  way SGLang's index-key pool holds them (sglang_mx.attention.dsa.index_k_pages, checked against
  SGLang's own writer in test_dsa_pool_layout): the effect of FP8 index keys on this model.
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
