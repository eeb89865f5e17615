"""The MLA latent cache of SGLang 0.5.23's MLA / DSA KV pool as mx_dsa writes and reads it: which
row layout the pool holds (sgl_kernel_rocm's LatentLayout), and the write through SGLang's own
path for it.

An FP8 pool (`--kv-cache-dtype fp8_e4m3`) is written the way SGLang's in-tree DSA backend writes
it, `MLATokenToKVPool.set_mla_kv_buffer(layer, loc, k_nope, k_rope)`, so the pool picks the
layout (`_write_mla_kv_buffer`):
- HIP: plain FP8 rows of the 576-wide latent, a cast, scale 1
  (`set_mla_kv_buffer_triton_fp8_quant`);
- a pool with `override_kv_cache_dim` (`dsa_kv_cache_store_fp8`; SGLang sizes it so whenever its
  DSA backends read scaled FP8: flashmla_kv on Hopper, flashinfer on SM120, and on a CPU box,
  where the (0, 0) capability resolves to flashmla_kv): packed rows, FP8 NoPE values, an fp32
  scale per 128, the bf16 RoPE tail (`quantize_k_cache_separate`);
- otherwise (CUDA with raw-layout DSA backends: trtllm on Blackwell, tilelang): plain FP8 rows, a
  cast.
`MLATokenToKVPool.set_kv_buffer`, which mx_dsa called before, asserts `not
dsa_kv_cache_store_fp8`. Float pools keep that write (one copy; the same bytes).

On a CPU box SGLang's quantizer is a Triton kernel run by the interpreter, whose fp32 -> e4m3
cast (Triton 3.8) rounds without carrying into the exponent: a value whose mantissa rounds up
past the binade's top lands a binade low (124.3 -> 64 instead of 128; ~1% of a latent's values
halved). `cpu_quantize_k_cache` (an AROUND hook on `quantize_k_cache_separate`, registered by
dsa/cpu.py) runs the same rule in torch there, whose cast rounds to nearest even as the GPU does.

SGLang-private access (0.5.23): MLATokenToKVPool.kv_lora_rank / qk_rope_head_dim / dtype /
kv_cache_dim / dsa_kv_cache_store_fp8 / set_mla_kv_buffer / set_kv_buffer,
DSATokenToKVPool.quant_block_size / rope_storage_dtype, dsa_quant_k_cache.quantize_k_cache_separate
(hooked; its tile_size keyword).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout

# sgl_kernel_rocm (Triton kernels) is imported when a pool is read or written, not when dsa/cpu.py
# registers the hook below at plugin time.
logger = logging.getLogger(__name__)
_LOGGED: set[tuple[int, str]] = set()  # (id of a pool, its layout): said once per process


def layout_of(pool: Any) -> LatentLayout:
    """The row layout SGLang chose for `pool`'s latent buffers (checked against their width)."""
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout

    d_lat, d_rope = int(pool.kv_lora_rank), int(pool.qk_rope_head_dim)
    width = int(pool.kv_cache_dim)
    if getattr(pool, "dsa_kv_cache_store_fp8", False):
        layout = LatentLayout.packed_fp8(d_lat, d_rope, int(pool.quant_block_size))
        rope_dtype = getattr(pool, "rope_storage_dtype", torch.bfloat16)
        if width != layout.row_width or rope_dtype != torch.bfloat16:
            raise ValueError(
                f"the pool's packed FP8 latent rows are {width} bytes with a {rope_dtype} rope "
                f"tail; {layout.name} rows are {layout.row_width} bytes with a bf16 one"
            )
        return _said(pool, layout)
    layout = LatentLayout.plain(d_lat, d_rope)
    if width != layout.row_width:
        raise ValueError(
            f"the pool's latent rows are {width} wide, not c_kv {d_lat} + k_pe {d_rope}: a "
            "layout mx_dsa does not read"
        )
    return _said(pool, layout)


def _said(pool: Any, layout: LatentLayout) -> LatentLayout:
    key = (id(pool), layout.name)
    if key not in _LOGGED:
        _LOGGED.add(key)
        logger.info(
            "sglang_mx: mx_dsa latent cache: %s rows of %d, %s",
            layout.name,
            layout.row_width,
            pool.dtype,
        )
    return layout


def write(pool: Any, layer: Any, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Store the new tokens' latent rows k [T, 1, d_lat + d_rope] at `loc` in the layout the
    pool holds (see the module docstring)."""
    from sgl_kernel_rocm.attention.latent_layout import is_fp8

    if not is_fp8(pool.dtype):
        pool.set_kv_buffer(layer, loc, k, v)
        return
    d_lat = int(pool.kv_lora_rank)
    k_nope, k_rope = k[..., :d_lat], k[..., d_lat:]
    if getattr(pool, "dsa_kv_cache_store_fp8", False):
        # The packed rows keep the rope tail in bf16 and SGLang's quantizer sizes the tail by
        # the dtype it is given: a float32 model (--dtype float32) hands over its rope in bf16.
        k_rope = k_rope.to(torch.bfloat16)
    pool.set_mla_kv_buffer(layer, loc, k_nope, k_rope)


QUANTIZER = "sglang.kernels.ops.quantization.dsa_quant_k_cache.quantize_k_cache_separate"


def cpu_quantize_k_cache(original, k_nope, k_rope, *args, **kwargs):
    """AROUND hook on SGLang's `quantize_k_cache_separate` (the packed FP8 write's quantizer):
    CPU tensors get sgl_kernel_rocm's torch twin of it (LatentLayout.quantize: the same bytes,
    with a correct cast), GPU tensors SGLang's kernel."""
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout

    if k_nope.device.type != "cpu":
        return original(k_nope, k_rope, *args, **kwargs)
    group = int(kwargs.get("tile_size", args[0] if args else 128))
    if k_rope is None or k_rope.numel() == 0:
        return original(k_nope, k_rope, *args, **kwargs)  # no-PE MLA: not a DSA latent
    d_lat = k_nope.shape[-1]
    layout = LatentLayout.packed_fp8(d_lat, k_rope.shape[-1], group)
    return layout.quantize(k_nope, k_rope)
