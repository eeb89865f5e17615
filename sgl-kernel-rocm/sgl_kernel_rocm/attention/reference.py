"""Float64 torch references of the decode-attention kernels, one per public wrapper: what the
numerics tests, the load-time self-check and the GPU check compare the Triton kernels against.
The attention ones loop over requests and gather the visible keys by position (slow, plain, no
splits). Callers reach them through `sgl_kernel_rocm.attention` or this module.
"""

from __future__ import annotations

from typing import Any

import torch

from sgl_kernel_rocm.attention import _common
from sgl_kernel_rocm.attention.dsa_indexer import as_paged_keys
from sgl_kernel_rocm.attention.gqa_decode import as_paged
from sgl_kernel_rocm.attention.latent_layout import LatentLayout
from sgl_kernel_rocm.attention.mla_decode import ROPE_DIM


def gqa_decode_ref(
    *tensors: torch.Tensor,
    k_scale: _common.Scale = None,
    v_scale: _common.Scale = None,
    sm_scale: float | None = None,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Float64 torch reference of gqa_decode, over its tensors (q, k_cache, v_cache,
    block_table, seq_lens); a request with no visible key yields zeros."""
    q, k_cache, v_cache, block_table, seq_lens = tensors
    k_cache, v_cache = as_paged(k_cache), as_paged(v_cache)
    batch, hq, d = q.shape
    _, page, hkv, _ = k_cache.shape
    group = hq // hkv
    sm_scale = d**-0.5 if sm_scale is None else sm_scale
    ks = _common.scale_vector(k_scale, hkv, q.device).double()
    vs = _common.scale_vector(v_scale, hkv, q.device).double()
    out = torch.zeros(batch, hq, v_cache.shape[-1], dtype=torch.float64, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        windowed = sliding_window is not None and sliding_window >= 0
        start = max(0, n - 1 - sliding_window) if windowed else 0
        pos = torch.arange(start, n, device=q.device)
        if pos.numel() == 0:
            continue
        pages = block_table[b, pos // page].long()
        k = k_cache[pages, pos % page].double() * ks[None, :, None]  # [n, Hkv, D]
        v = v_cache[pages, pos % page].double() * vs[None, :, None]
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].double(), k) * sm_scale
        out[b] = torch.einsum("hn,nhd->hd", torch.softmax(s, dim=-1), v)
    return out


def _scalar(scale: _common.Scale) -> float:
    """Host value of the scale, for the float64 references only."""
    if scale is None:
        return 1.0
    t = torch.as_tensor(scale)
    if t.numel() != 1:
        raise ValueError("MLA FP8 latent caches take one per-tensor scale")
    return float(t)


def mla_decode_ref(
    *tensors: torch.Tensor,
    kv_scale: _common.Scale = None,
    sm_scale: float | None = None,
    indices: torch.Tensor | None = None,
    layout: LatentLayout | None = None,
) -> torch.Tensor:
    """Float64 reference of mla_decode, over its tensors (q, kv_cache, block_table, seq_lens);
    with `indices` [B, K] only those positions (-1/out of range skipped, duplicates counted as
    often as listed) are attended; `layout` unpacks the cache rows (latent_layout.py). No
    visible key yields zeros."""
    q, kv_cache, block_table, seq_lens = tensors
    if kv_cache.dim() == 2:
        kv_cache = kv_cache.unsqueeze(1)
    batch, heads, d = q.shape
    page = kv_cache.shape[1]
    d_lat = d - ROPE_DIM
    layout = layout or LatentLayout.plain(d_lat, ROPE_DIM)
    sm_scale = (192 + ROPE_DIM) ** -0.5 if sm_scale is None else sm_scale
    scale = _scalar(kv_scale)
    out = torch.zeros(batch, heads, d_lat, dtype=torch.float64, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        if indices is None:
            pos = torch.arange(n, device=q.device)
        else:
            pos = indices[b].long()
            pos = pos[(pos >= 0) & (pos < n)]
        if pos.numel() == 0:
            continue
        kv = layout.unpack(kv_cache[block_table[b, pos // page].long(), pos % page]) * scale
        s = torch.einsum("hd,nd->hn", q[b].double(), kv) * sm_scale
        out[b] = torch.softmax(s, dim=-1) @ kv[:, :d_lat]
    return out


def dsa_sparse_decode_ref(*tensors: torch.Tensor, **options: Any) -> torch.Tensor:
    """Float64 reference of dsa_sparse_decode, with its arguments (q, kv_cache, block_table,
    seq_lens, indices; kv_scale, sm_scale): mla_decode_ref over the listed positions."""
    *dense, indices = tensors
    return mla_decode_ref(*dense, indices=indices, **options)


def dsa_indexer_scores_ref(*tensors: torch.Tensor) -> torch.Tensor:
    """Float64 reference of dsa_indexer_scores, over its tensors (q, weights, k_cache, k_scale,
    block_table, seq_lens); width max(seq_lens)."""
    q, weights, k_cache, k_scale, block_table, seq_lens = tensors
    k_cache, k_scale = as_paged_keys(k_cache, k_scale)
    page = k_cache.shape[1]
    max_len = int(seq_lens.max())
    out = torch.full((q.shape[0], max_len), float("-inf"), dtype=torch.float64)
    for b in range(q.shape[0]):
        pos = torch.arange(int(seq_lens[b]))
        pages = block_table[b, pos // page].long()
        k = k_cache[pages, pos % page].double() * k_scale[pages, pos % page].double()[:, None]
        s = torch.relu(q[b].double() @ k.T)  # [Hi, n]
        out[b, : pos.numel()] = (weights[b].double()[:, None] * s).sum(0)
    return out


def merge_splits_ref(o_part: torch.Tensor, lse_part: torch.Tensor) -> torch.Tensor:
    """Torch reference of merge_splits in float64."""
    lse = lse_part.double()
    m = lse.amax(dim=1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w = torch.exp2(lse - m)
    denom = w.sum(dim=1, keepdim=True)
    out = (o_part.double() * w[..., None]).sum(dim=1) / torch.where(denom > 0, denom, 1.0)
    return out
