"""Paged GQA decode attention (one query token per request), split-KV with a separate reduce.

KV cache: [num_pages, page_size, num_kv_heads, head_dim] (a 3-D [num_tokens, Hkv, D] pool is
page size 1, SGLang's token-level layout), bf16/fp16/fp32 or FP8 e4m3 with one dequant scale per
KV head. block_table[b, i] is the physical page holding tokens [i*P, (i+1)*P) of request b.
One program serves all query heads of a KV head (GQA packing), so K/V are read once per group.
Sliding window W keeps keys at positions >= seq_len - 1 - W (SGLang's torch_native convention).

The public wrapper; the Triton body is _gqa_decode_kernels.py, the float64 reference
`gqa_decode_ref` is in reference.py.
"""

from __future__ import annotations

import torch

from sgl_kernel_rocm.attention import _common, split_kv
from sgl_kernel_rocm.attention._gqa_decode_kernels import _gqa_decode_split_kernel


def as_paged(cache: torch.Tensor) -> torch.Tensor:
    """A token pool [num_tokens, H, D] is pages of one token [num_tokens, 1, H, D]."""
    return cache.unsqueeze(1) if cache.dim() == 3 else cache


def gqa_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    k_scale: _common.Scale = None,
    v_scale: _common.Scale = None,
    sm_scale: float | None = None,
    sliding_window: int | None = None,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    return_lse: bool = False,
    max_seq_len: int | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Decode attention of q [B, Hq, D] over a paged KV cache; returns [B, Hq, Dv] in q.dtype.

    No host sync: `max_seq_len` (a host int >= every seq_lens entry, e.g. max of SGLang's
    seq_lens_cpu) sizes the split plan; without it the block table's capacity does. With a fixed
    `num_splits` the launch shape depends on shapes only (CUDA-graph capturable).

    With return_lse, also returns the natural-log log-sum-exp of the scores [B, Hq] (fp32), so
    callers can merge with other attention pieces (e.g. a prefix computed elsewhere).
    """
    k_cache, v_cache = as_paged(k_cache), as_paged(v_cache)
    batch, hq, d = q.shape
    _, page_size, hkv, dk = k_cache.shape
    dv = v_cache.shape[-1]
    if dk != d or v_cache.shape[:3] != k_cache.shape[:3]:
        raise ValueError(
            f"q {tuple(q.shape)} / k {tuple(k_cache.shape)} / v {tuple(v_cache.shape)} do not agree"
        )
    if hq % hkv:
        raise ValueError(f"{hq} query heads are not a multiple of {hkv} KV heads")
    if k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1 or q.stride(-1) != 1:
        raise ValueError("q, k_cache and v_cache need a contiguous last dim")
    _common.check_block_table(block_table, seq_lens, page_size)
    _common.check_splits(num_splits)
    cap = block_table.shape[1] * page_size
    group = hq // hkv
    sm_scale = d**-0.5 if sm_scale is None else sm_scale
    window = -1 if sliding_window is None or sliding_window < 0 else int(sliding_window)

    kv_tag = "fp8" if k_cache.dtype == torch.float8_e4m3fn else "16"
    cfg = _common.resolve_config("decode_gqa", batch, f"hq{hq}_hkv{hkv}_d{d}_kv{kv_tag}")
    max_len = _common.context_bound(block_table, page_size, max_seq_len)
    if window >= 0:
        max_len = min(max_len, window + 1)
    splits = num_splits or _common.plan_splits(cfg, batch * hkv, max_len)

    ks = _common.scale_vector(k_scale, hkv, q.device)
    vs = _common.scale_vector(v_scale, hkv, q.device)
    parts = split_kv.SplitKV.plan(q, out, hq, dv, splits)
    if batch:
        _gqa_decode_split_kernel[(batch, hkv, splits)](
            q,
            k_cache,
            v_cache,
            block_table,
            seq_lens,
            ks,
            vs,
            parts.o_part,
            parts.lse_part,
            sm_scale * _common.LOG2E,
            cap,
            window,
            splits,
            *q.stride()[:2],
            *k_cache.stride()[:3],
            *v_cache.stride()[:3],
            block_table.stride(0),
            *parts.strides(),
            GROUP=group,
            PAGE=page_size,
            D=d,
            DV=dv,
            BLOCK_H=max(16, _common.next_pow2(group)),
            BLOCK_D=max(16, _common.next_pow2(d)),
            BLOCK_DV=max(16, _common.next_pow2(dv)),
            BLOCK_N=int(cfg["BLOCK_N"]),
            **_common.launch_options(cfg, q),
        )
    return parts.finish(return_lse)
