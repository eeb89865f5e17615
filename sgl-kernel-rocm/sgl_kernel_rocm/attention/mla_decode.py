"""Paged MLA decode in absorbed form (GLM-5 / DeepSeek shapes), dense or top-k sparse: the public
wrapper (checks, launch config, heads per program, split plan, the launch) and the tile
variants the arch tables and benchmarks name. The Triton body (and how one program reads the
latent cache) is _mla_decode_kernels.py; the float64 reference `mla_decode_ref` is in
reference.py. Split-KV partials and their merge: split_kv.py.
"""

from __future__ import annotations

import torch

from sgl_kernel_rocm.attention import _common, fp8_bits, split_kv
from sgl_kernel_rocm.attention._mla_decode_kernels import _mla_decode_split_kernel
from sgl_kernel_rocm.attention.latent_layout import LatentLayout, is_fp8

KV_LORA_RANK = 512
ROPE_DIM = 64


MAX_BLOCK_H = 64  # heads one program holds; more heads take several head blocks
# Launch-config entries a caller may override (mla_decode's tile_config).
TILE_KEYS = frozenset({"BLOCK_N", "BLOCK_H", "num_warps", "num_stages", "KEYS_ON_M", "PREFETCH"})
# The kernel's tile variants by name (arch tables set them per shape; benchmarks time each).
TILE_VARIANTS = {
    "table": {},
    "keys_on_m": {"KEYS_ON_M": True, "PREFETCH": False},
    "prefetch": {"KEYS_ON_M": False, "PREFETCH": True},
    "keys_on_m+prefetch": {"KEYS_ON_M": True, "PREFETCH": True},
}


def _scale_tensor(scale: _common.Scale, device: torch.device) -> torch.Tensor:
    """The per-tensor dequant scale as a 1-element fp32 device tensor (read by the kernel, so a
    device-resident scale is never copied to the host)."""
    if isinstance(scale, torch.Tensor) and scale.numel() != 1:
        raise ValueError("MLA FP8 latent caches take one per-tensor scale")
    return _common.scale_vector(scale, 1, device)


def mla_block_h(cfg: dict, heads: int) -> int:
    """Heads per program: all of the rank's heads (power of two, >= 16 for the MMA), capped by
    the table's BLOCK_H (chosen per arch by the compile gate: where a [64, 512] fp32 accumulator
    spills, a smaller block) and by MAX_BLOCK_H. A table without BLOCK_H keeps 16."""
    cap = min(int(cfg.get("BLOCK_H", 16)), MAX_BLOCK_H)
    return max(16, min(cap, _common.next_pow2(heads)))


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    indices: torch.Tensor | None = None,
    kv_scale: _common.Scale = None,
    sm_scale: float | None = None,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    return_lse: bool = False,
    max_seq_len: int | None = None,
    tile_config: dict | None = None,
    layout: LatentLayout | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA decode: q [B, H, 512+64] over a paged latent cache -> [B, H, 512].

    With `indices` [B, K] (checked by dsa_sparse_decode, the public sparse entry) only those
    positions are attended. sm_scale defaults to GLM-5's 1/sqrt(qk_nope + qk_rope) =
    1/sqrt(256). `max_seq_len` (a host int >= every seq_lens entry, e.g. max of SGLang's
    seq_lens_cpu) sizes the split plan; without it the block table's capacity does. No host
    sync either way (see _common.py); CUDA-graph capturable with a fixed `num_splits`.
    `tile_config` overrides entries of the arch table's launch config (BLOCK_N, num_warps,
    BLOCK_H, KEYS_ON_M, PREFETCH; e.g. a TILE_VARIANTS entry), for benchmarks and tests.
    `layout` says how the cache stores a row (latent_layout.py; default plain rows of q's
    width); packed FP8 rows carry their own scales, so they take no `kv_scale`.
    """
    if kv_cache.dim() == 2:
        kv_cache = kv_cache.unsqueeze(1)
    batch, heads, d = q.shape
    d_lat = d - ROPE_DIM
    if d_lat <= 0 or d_lat != _common.next_pow2(d_lat):
        raise ValueError(
            f"q [B, H, {d}] must be a power-of-two latent plus {ROPE_DIM} rope dims "
            "(GLM-5: 512 + 64)"
        )
    layout = layout or LatentLayout.plain(d_lat, ROPE_DIM)
    if (layout.d_lat, layout.d_rope) != (d_lat, ROPE_DIM):
        raise ValueError(
            f"q [B, H, {d}] is {d_lat} latent + {ROPE_DIM} rope dims, the layout "
            f"{layout.d_lat} + {layout.d_rope}"
        )
    if layout.packed and kv_scale is not None:
        raise ValueError("packed FP8 latent rows carry their own scales: pass no kv_scale")
    cache = layout.kernel_view(kv_cache)
    page_size = cache.shape[1]
    if q.stride(-1) != 1:
        raise ValueError("q needs a contiguous last dim")
    _common.check_block_table(block_table, seq_lens, page_size)
    _common.check_splits(num_splits)
    bound = _common.context_bound(block_table, page_size, max_seq_len)
    sm_scale = (192 + ROPE_DIM) ** -0.5 if sm_scale is None else sm_scale
    # Packed rows have table entries of their own (the per-group dequant holds more registers
    # than the plain FP8 tiles: e.g. sm90's 64-head FP8 tile spills with it): the DEFAULT ones
    # until an arch's table names them.
    kv_tag = "fp8packed" if layout.packed else "fp8" if is_fp8(kv_cache.dtype) else "16"
    op = "decode_mla" if indices is None else "decode_dsa"
    unknown = set(tile_config or {}) - TILE_KEYS
    if unknown:
        raise ValueError(f"tile_config keys {sorted(unknown)} are not among {sorted(TILE_KEYS)}")
    cfg = _common.resolve_config(op, batch, f"h{heads}_d{d}_kv{kv_tag}") | (tile_config or {})
    block_h = mla_block_h(cfg, heads)
    head_blocks = -(-heads // block_h)
    num_idx = 0 if indices is None else indices.shape[1]
    work = bound if indices is None else min(num_idx, bound)
    splits = num_splits or _common.plan_splits(cfg, batch * head_blocks, work)

    parts = split_kv.SplitKV.plan(q, out, heads, d_lat, splits)
    idx = indices if indices is not None else seq_lens
    if batch:
        _mla_decode_split_kernel[(batch, head_blocks, splits)](
            q,
            cache,
            block_table,
            seq_lens,
            idx,
            parts.o_part,
            parts.lse_part,
            _scale_tensor(kv_scale, q.device),
            sm_scale * _common.LOG2E,
            block_table.shape[1] * page_size,
            heads,
            num_idx,
            splits,
            *q.stride()[:2],
            *cache.stride()[:2],
            block_table.stride(0),
            idx.stride(0),
            *parts.strides(),
            PAGE=page_size,
            D_LAT=d_lat,
            D_ROPE=ROPE_DIM,
            BLOCK_H=block_h,
            BLOCK_N=int(cfg["BLOCK_N"]),
            SPARSE=indices is not None,
            KEYS_ON_M=bool(cfg.get("KEYS_ON_M", False)),
            PREFETCH=bool(cfg.get("PREFETCH", False)),
            **layout.kernel_constexprs(kv_cache, fp8_bits.host_isa()),
            **_common.launch_options(cfg, q),
        )
    return parts.finish(return_lse)
