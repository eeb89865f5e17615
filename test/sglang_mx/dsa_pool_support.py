"""SGLang 0.5.23's DSA KV pool (MLA latent + FP8 index-key pages, page 64) on the CPU, built bare
(no server) for the mx_dsa backend tests."""

from __future__ import annotations

import torch

PAGE = 64


def dsa_pool(size: int, layers: int):
    """A DSATokenToKVPool of `size` token slots (plus SGLang's padding page) with GLM-5's widths:
    latent 512 + rope 64, index keys 128; float32 latent."""
    from sglang.srt.mem_cache.memory_pool import DSATokenToKVPool
    from sglang.srt.runtime_context import get_parallel

    # A server publishes its parallel config; a bare pool (and its KV write) reads these two.
    get_parallel().override_permanently(attn_dcp_size=1, dcp_enabled=False)
    return DSATokenToKVPool(
        size=size,
        page_size=PAGE,
        kv_lora_rank=512,
        dtype=torch.float32,
        qk_rope_head_dim=64,
        layer_num=layers,
        device="cpu",
        index_head_dim=128,
        enable_memory_saver=False,
        kv_cache_dim=576,
    )
