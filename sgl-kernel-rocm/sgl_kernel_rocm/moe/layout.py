"""MXFP4 expert weights prepared once at load for the Triton MoE (`fused_moe_mxfp4(layout=)`).

What is decided here, once, instead of on every call:
- the weights are contiguous and 4-byte aligned, so the `unpack` path reads them as int32
  words (8 E2M1 nibbles per 32-bit op, `_upcast.upcast_words`);
- whether every E8M0 scale lies in [0, 128] (no NaN, no scale above 2): then the upcast is one
  bf16 multiply per two weights (`FULL_SCALE_RANGE=False`); otherwise the kernels take the
  full-range variant (a second multiply). Checking needs one host sync, paid here at load.

Values and scales keep the checkpoint's order (OCP MX v1.0: even element in the low nibble):
the word-wise upcast reads that order directly, so no re-layout copy is made.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sgl_kernel_rocm.moe.weights import MoEWeights

# E8M0 byte whose bf16 multiplier 2**(s-1) (the 2**126 subnormal bias times 2**(s-127)) is
# still a normal bf16; see _upcast.dequant_words.
FAST_SCALE_MAX = 128


@dataclass(frozen=True)
class MoEWeightLayout:
    fast_scales: bool  # every scale of w13 and w2 <= FAST_SCALE_MAX
    words: bool  # weights contiguous and 4-byte aligned: int32 word loads are legal


def scales_in_fast_range(scales: torch.Tensor) -> bool:
    """True when every E8M0 byte is <= FAST_SCALE_MAX (one host sync)."""
    if scales.dtype != torch.uint8:
        raise ValueError(f"E8M0 scales must be uint8, got {scales.dtype}")
    return scales.numel() == 0 or int(scales.max().item()) <= FAST_SCALE_MAX


def _word_ready(w: torch.Tensor) -> bool:
    return w.is_contiguous() and w.data_ptr() % 4 == 0 and w.shape[-1] % 4 == 0


def prepare_weights(weights: MoEWeights) -> MoEWeightLayout:
    """Inspect the MXFP4 expert weights once (at load) and return what the kernels may assume."""
    for name, t in (("w13", weights.w13), ("w2", weights.w2)):
        if t.dtype != torch.uint8:
            raise ValueError(f"{name} must be packed MXFP4 uint8, got {t.dtype}")
    return MoEWeightLayout(
        fast_scales=scales_in_fast_range(weights.w13_scale)
        and scales_in_fast_range(weights.w2_scale),
        words=_word_ready(weights.w13) and _word_ready(weights.w2),
    )
