"""SGLang 0.5.23's DSA KV pool (MLA latent + FP8 index-key pages, page 64) on the CPU, built bare
(no server) for the mx_dsa backend tests, and what drives mx_dsa's backend over it: requests'
page tables, the backend itself, a decode batch."""

from __future__ import annotations

from types import SimpleNamespace

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


def scattered_requests(pool, seq_lens: list[int]) -> torch.Tensor:
    """req_to_token rows (512 slots each) over scattered whole pages of `pool`, as SGLang's page
    allocator hands them out (never page 0, SGLang's padding page)."""
    pages = torch.randperm(pool.size // PAGE - 1)[: sum(-(-n // PAGE) for n in seq_lens)] + 1
    req_to_token = torch.zeros(len(seq_lens), 512, dtype=torch.int32)
    used = 0
    for r, n in enumerate(seq_lens):
        k = -(-n // PAGE)
        slots = (pages[used : used + k, None] * PAGE + torch.arange(PAGE)).flatten()
        req_to_token[r, : k * PAGE] = slots.to(torch.int32)
        used += k
    return req_to_token


def mx_dsa_backend(pool, req_to_token: torch.Tensor, triton: bool, monkeypatch):
    """mx_dsa's backend over `pool` for a bare model runner, on the Triton path (the GPU's
    kernels) or the torch one (what the CPU serves)."""
    from sglang_mx.attention.dsa import backend as mx_dsa

    monkeypatch.setenv(mx_dsa.FORCE_TRITON_ENV, "1" if triton else "0")
    runner = SimpleNamespace(
        device="cpu",
        req_to_token_pool=SimpleNamespace(req_to_token=req_to_token),
        token_to_kv_pool=pool,
        page_size=PAGE,
    )
    return mx_dsa.MxDsaAttnBackend(runner)


def decode_batch(seq_lens: list[int], req_to_token: torch.Tensor):
    """A decode step's ForwardBatch, as far as the backend reads it: each request's new token
    goes to its last slot."""
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    last = torch.tensor([int(req_to_token[r, n - 1]) for r, n in enumerate(seq_lens)])
    return SimpleNamespace(
        forward_mode=ForwardMode.DECODE,
        seq_lens=torch.tensor(seq_lens),
        seq_lens_cpu=torch.tensor(seq_lens),
        req_pool_indices=torch.arange(len(seq_lens)),
        out_cache_loc=last,
    )
