"""Host-side batch lengths the decode backends (mx_triton, mx_dsa) size their launches with.

SGLang 0.5.23 keeps a CPU copy of each batch's lengths (`forward_batch.seq_lens_cpu`); reading
it costs no device sync, unlike `forward_batch.seq_lens` on a GPU.
"""

from __future__ import annotations

import torch


def host_max(seq_lens_cpu: torch.Tensor | None) -> int | None:
    """Max of SGLang's host-side lengths (a CPU tensor: no device sync), or None."""
    if seq_lens_cpu is None or seq_lens_cpu.numel() == 0:
        return None
    return max(seq_lens_cpu.tolist())
