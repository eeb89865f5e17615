"""Hooks for the `mx_cuda` platform (registered by the plugin when it is the platform): two
places where SGLang 0.5.23, seeing CUDA (`_is_cuda`), calls a JIT-compiled CUDA kernel of its
own outside the custom-op dispatch. Their sources are not carried to GPU machines without SGLang
(scripts/gpu_serve_assets.py trims them) and JIT needs SGLang's toolchain; torch does the same.
"""

from __future__ import annotations

import torch

from sglang_mx.sglang_version import hook


def mask_padded_rows(topk_ids: torch.Tensor, num_token_non_padded: torch.Tensor, fill: int):
    """Rows at or past `num_token_non_padded` (a device tensor: no host sync, graph-safe) get
    `fill`."""
    rows = torch.arange(topk_ids.shape[0], device=topk_ids.device)
    topk_ids.masked_fill_((rows >= num_token_non_padded)[:, None], fill)


def _mask_padded_on_torch(original, topk_ids, num_token_non_padded=None, fill_value=-1):
    """AROUND hook on topk._mask_topk_ids_padded_region: on CUDA, int32 ids with fill -1 go to
    the JIT `mask_topk_ids` kernel (kernels/ops/moe/dsv4.py); CUDA-graph decode passes a
    padded-row count on every step."""
    if num_token_non_padded is None or not topk_ids.is_cuda:
        return original(topk_ids, num_token_non_padded, fill_value)
    mask_padded_rows(topk_ids, num_token_non_padded, fill_value)
    return None


def _no_tiny_router_gemm(original, *args, **kwargs) -> int:
    """AROUND hook on deepseek_common.utils.tiny_router_gemm_max_tokens: -1 (never) instead of
    the JIT tiny GEMM SGLang picks for bf16 routers on sm90+; the router runs torch's matmul."""
    return -1


def register() -> None:
    hook(
        "sglang.srt.layers.moe.topk._mask_topk_ids_padded_region",
        _mask_padded_on_torch,
        "AROUND",
    )
    hook(
        "sglang.srt.models.deepseek_common.utils.tiny_router_gemm_max_tokens",
        _no_tiny_router_gemm,
        "AROUND",
    )
