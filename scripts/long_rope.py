"""The RoPE SGLang 0.5.23 serves for GlmMoeDsaForCausalLM, written out so the long-context trainer
computes exactly it: cos/sin tables for any position and the attention's softmax scale.

Read from SGLang 0.5.23's source (2026-12-06):

- `srt/models/deepseek_v2.py` (`DeepseekV2DecoderLayer`, which `GlmMoeDsaForCausalLM` uses):
  `rope_scaling = config.rope_parameters` when its `rope_type` is not "default" (else None), and
  `DeepseekV2AttentionMLA` rewrites `rope_scaling["rope_type"] = "deepseek_yarn"` whatever type
  was asked ("yarn" included) before building both RoPEs.
- `srt/layers/rotary_embedding/factory.py`: `deepseek_yarn` takes `factor`,
  `original_max_position_embeddings` (default: max_position_embeddings) and, if present,
  `extrapolation_factor`, `attn_factor`, `beta_fast`, `beta_slow`, `mscale`, `mscale_all_dim`
  into `DeepseekScalingRotaryEmbedding` (`rope_variant.py`). On CPU it is the only scaling type.
- That class: YaRN inverse frequencies over `qk_rope_head_dim` (correction range from beta_fast /
  beta_slow at the original length, floor/ceil truncated) and cos/sin multiplied by
  `mscale = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) * attn_factor`.
- `compute_mla_mscale_scaling` (`configs/model_config.py`): the MLA softmax scale
  `qk_head_dim**-0.5` is multiplied by `get_mscale(factor, mscale_all_dim)**2`.
- The DSA indexer (`srt/layers/attention/dsa/dsa_indexer.py`) builds its own RoPE from the same
  (rewritten) dict, so the indexer's rotary dims are YaRN-scaled too, cos/sin mscale included;
  its layout is interleaved iff `indexer_rope_interleave` (our config: true), the main MLA RoPE's
  iff `rope_interleave` (default true). Its softmax scale stays `index_head_dim**-0.5`.
- Served context (`srt/utils/hf_transformers/common.py` `get_context_length`):
  `max_position_embeddings x factor` unless `original_max_position_embeddings` is in the dict,
  then `max_position_embeddings`. So a YaRN config must carry it.

transformers 5.19's `GlmMoeDsaForCausalLM` computes the same cos/sin (one table fed to MLA and the
indexer) and the same softmax scale, except that it ignores `mscale` unless `mscale_all_dim` is
set too: `yarn_parameters` writes both, so the two libraries agree.
"""

from __future__ import annotations

import math

import torch


def get_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_parameters(
    factor: float, original: int, theta: float = 10000.0, beta_fast: float = 32.0,
    beta_slow: float = 1.0, mscale: float = 1.0, mscale_all_dim: float = 1.0,
) -> dict:  # fmt: skip
    """`rope_parameters` for config.json: YaRN x`factor` from `original` trained positions."""
    return {
        "rope_type": "yarn",
        "rope_theta": theta,
        "factor": float(factor),
        "original_max_position_embeddings": int(original),
        "beta_fast": float(beta_fast),
        "beta_slow": float(beta_slow),
        "mscale": float(mscale),
        "mscale_all_dim": float(mscale_all_dim),
    }


def _is_scaled(rope: dict) -> bool:
    return rope.get("rope_type", rope.get("type", "default")) != "default"


def inv_freq_and_mscale(rope: dict, dim: int) -> tuple[torch.Tensor, float]:
    """Inverse frequencies [dim/2] and the cos/sin multiplier, as DeepseekScalingRotaryEmbedding
    (or the plain RotaryEmbedding for rope_type "default") computes them."""
    base = float(rope["rope_theta"])
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)
    if not _is_scaled(rope):
        return 1.0 / pos_freqs, 1.0
    factor = float(rope.get("factor", 1.0))
    original = int(rope["original_max_position_embeddings"])
    beta_fast, beta_slow = rope.get("beta_fast", 32), rope.get("beta_slow", 1)

    def correction_dim(rotations: float) -> float:
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float) - low) / (high - low)).clamp(0, 1)
    keep = (1 - ramp) * float(rope.get("extrapolation_factor", 1))
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - keep) + (1.0 / pos_freqs) * keep
    mscale = (
        get_mscale(factor, float(rope.get("mscale", 1)))
        / get_mscale(factor, float(rope.get("mscale_all_dim", 0)))
        * float(rope.get("attn_factor", 1))
    )
    return inv_freq, mscale


def softmax_scale(rope: dict, qk_head_dim: int) -> float:
    """The MLA attention's softmax scale (compute_mla_mscale_scaling)."""
    scale = qk_head_dim**-0.5
    if not _is_scaled(rope) or not rope.get("apply_yarn_scaling", True):
        return scale
    m = get_mscale(float(rope.get("factor", 1.0)), float(rope.get("mscale_all_dim", 0)))
    return scale * m * m


def cos_sin(rope: dict, dim: int, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[L, dim/2] cos and sin (mscale applied) at `positions`, float32."""
    inv_freq, mscale = inv_freq_and_mscale(rope, dim)
    freqs = positions.float()[:, None] * inv_freq[None, :]
    return freqs.cos() * mscale, freqs.sin() * mscale


def rotate_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Interleaved-pair RoPE on x [L, ..., dim] with cos/sin [L, dim/2]; the output lays the pairs'
    first elements then their second (as transformers does: dot products are unchanged as long as
    queries and keys share the layout)."""
    shape = (cos.shape[0],) + (1,) * (x.dim() - 2) + (cos.shape[1],)
    c, s = cos.view(shape), sin.view(shape)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
