"""Torch MLA + DSA math over SGLang's paged pools: the CPU path, and the reference for the GPU one.

Queries arrive absorbed (q_nope @ W_UK, then the rope part): q [T, H, 512 + 64]. Each token's
latent cache row is [c_kv (512) | k_pe (64)] (in one of SGLang's row layouts, plain or packed
FP8: sgl_kernel_rocm's LatentLayout unpacks it); scores are q . row * scale and values are c_kv,
so the output [T, H, 512] stays in latent space (the model applies W_UV). A batch is a list of
requests, each with `extend` new tokens (1 for decode) at the end of `seq_len` cached tokens,
so prefill, extend over a radix-cache prefix, chunked prefill and mixed prefill+decode batches
are one case. DSA top-k indices are logical positions in the request (-1 = none).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from sgl_kernel_rocm.attention.latent_layout import LatentLayout

from sglang_mx.attention.dsa.index_k_pages import IndexKLayout


@dataclass(frozen=True)
class Request:
    start: int  # first row of this request's new tokens in the batch
    extend: int  # new tokens (1 for a decode request)
    seq_len: int  # cached + new tokens
    slots: torch.Tensor  # int64 [seq_len]: KV-pool token slot of each logical position

    @property
    def prefix(self) -> int:
        return self.seq_len - self.extend


def causal_mask(req: Request, device) -> torch.Tensor:
    """[extend, seq_len] bool: query i (position prefix + i) sees keys 0..prefix + i."""
    q_pos = torch.arange(req.prefix, req.seq_len, device=device)
    return torch.arange(req.seq_len, device=device)[None, :] <= q_pos[:, None]


def index_topk(
    q: torch.Tensor,
    weights: torch.Tensor,
    index_buf: torch.Tensor,
    index_k: IndexKLayout,
    requests: list[Request],
    top_k: int,
) -> torch.Tensor:
    """Top-k positions [T, top_k] int32 (-1 padded) from the FP8 index-key pool (`index_k`: its
    page layout).

    score[t, j] = sum_h weights[t, h] * relu(q[t, h] . k_j) over keys j <= position(t); `weights`
    already holds the head gate, 1/sqrt(heads) and the softmax scale.
    """
    out = torch.full((q.shape[0], top_k), -1, dtype=torch.int32, device=q.device)
    for req in requests:
        rows = slice(req.start, req.start + req.extend)
        keys = index_k.load(index_buf, req.slots)
        s = torch.relu(torch.einsum("ehd,ld->ehl", q[rows].float(), keys))
        score = (s * weights[rows].float().unsqueeze(-1)).sum(1)
        score = score.masked_fill(~causal_mask(req, q.device), float("-inf"))
        n = min(top_k, req.seq_len)
        vals, idx = score.topk(n, dim=-1)
        out[rows, :n] = torch.where(torch.isfinite(vals), idx, -1).to(torch.int32)
    return out


def topk_mask(idx: torch.Tensor, seq_len: int) -> torch.Tensor:
    """[E, seq_len] bool from top-k positions [E, K] (-1 ignored)."""
    sel = torch.zeros(idx.shape[0], seq_len, dtype=torch.bool, device=idx.device)
    valid = (idx >= 0) & (idx < seq_len)
    rows = torch.arange(idx.shape[0], device=idx.device).unsqueeze(1).expand_as(idx)
    sel[rows[valid], idx[valid].long()] = True
    return sel


def mla_attend(
    q: torch.Tensor,
    kv_buf: torch.Tensor,
    requests: list[Request],
    scale: float,
    d_latent: int,
    topk_indices: torch.Tensor | None = None,
    layout: LatentLayout | None = None,
) -> torch.Tensor:
    """Absorbed MLA over the latent pool kv_buf [slots, 1, row]: q [T, H, 576] -> [T, H, 512].

    With topk_indices each query attends only its selected keys (and never a future one).
    `layout`: how the pool stores a row (default plain rows, read as q's dtype)."""
    layout = layout or LatentLayout.plain(d_latent, q.shape[-1] - d_latent)
    out = q.new_zeros(q.shape[0], q.shape[1], d_latent)
    for req in requests:
        rows = slice(req.start, req.start + req.extend)
        kv = layout.unpack(kv_buf[req.slots, 0], q.dtype)
        s = torch.einsum("ehd,ld->ehl", q[rows], kv) * scale
        mask = causal_mask(req, q.device)
        if topk_indices is not None:
            mask = mask & topk_mask(topk_indices[rows], req.seq_len)
        s = s.masked_fill(~mask.unsqueeze(1), float("-inf"))
        p = torch.softmax(s.float(), dim=-1).to(q.dtype)
        out[rows] = torch.einsum("ehl,ld->ehd", p, kv[:, :d_latent])
    return out
