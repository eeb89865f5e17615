"""SGLang 0.5.23's FP8 index-key pool, read and written in its own layout with torch.

`DSATokenToKVPool` keeps, per indexer layer, a uint8 buffer [num_pages, page * (128 + 4)]: each
64-token page holds the 64 x 128 FP8 e4m3 keys of its tokens first, then their 64 fp32 scales
(one per token: SGLang quantizes in 128-wide blocks and the key is 128 wide). SGLang's own writer
(`kernels/ops/kvcache/dsa_index_k_cache.py`) is a Triton kernel; these views let CPU torch and
our GPU kernels use the same bytes; `IndexKLayout` is that page layout, beside latent_cache's
`LatentLayout` for the latent rows. Quantization mirrors SGLang's `act_quant` with
scale_fmt="ue8m0": scale = 2 ** ceil(log2(max(amax, 1e-4) / 448)), q = clamp(x / scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4
SCALE_BYTES = 4


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row (128-wide) FP8 e4m3 with a power-of-two scale: (x_fp8, scale [..]) like act_quant."""
    xf = x.float()
    amax = xf.abs().amax(dim=-1).clamp_min(AMAX_FLOOR)
    scale = torch.exp2(torch.ceil(torch.log2(amax / FP8_MAX)))
    q = (xf / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, scale


@dataclass(frozen=True)
class IndexKLayout:
    """One indexer layer's key pages: `page_size` tokens of `head_dim` FP8 keys, then their fp32
    scales, per uint8 row of the pool's buffer."""

    page_size: int
    head_dim: int

    @property
    def row_bytes(self) -> int:
        return self.page_size * (self.head_dim + SCALE_BYTES)

    def page_views(self, buf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys FP8 [num_pages, page, head_dim], scales fp32 [num_pages, page]) viewing `buf`."""
        page_size, head_dim, row = self.page_size, self.head_dim, self.row_bytes
        if buf.dtype != torch.uint8 or buf.dim() != 2 or buf.shape[1] != row:
            raise ValueError(
                f"index-key buffer must be uint8 [pages, {row}] for page {page_size} x dim "
                f"{head_dim}, got {buf.dtype} {tuple(buf.shape)}"
            )
        key_bytes = page_size * head_dim
        keys = buf[:, :key_bytes].view(FP8).view(buf.shape[0], page_size, head_dim)
        scales = buf[:, key_bytes:].view(torch.float32)
        return keys, scales

    def store(self, buf: torch.Tensor, loc: torch.Tensor, key: torch.Tensor) -> None:
        """Quantize key [T, head_dim] and write it at token slots `loc` [T]."""
        keys, scales = self.page_views(buf)
        q, scale = quantize(key)
        loc = loc.long()
        page, off = loc // self.page_size, loc % self.page_size
        keys[page, off] = q
        scales[page, off] = scale

    def load(self, buf: torch.Tensor, loc: torch.Tensor) -> torch.Tensor:
        """Dequantized fp32 keys [T, head_dim] at token slots `loc` [T]."""
        keys, scales = self.page_views(buf)
        loc = loc.long()
        page, off = loc // self.page_size, loc % self.page_size
        return keys[page, off].float() * scales[page, off].unsqueeze(-1)
