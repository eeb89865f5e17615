"""The one-launch Triton alignment (interpreter) against the torch alignment it replaces on the
GPU path: identical buffers, every slot once, pads and unused blocks marked, counters zeroed."""

from __future__ import annotations

import pytest
import torch
from sgl_kernel_rocm.moe.align import align_tokens, align_tokens_triton


def _poisoned(shape, dtype, device):
    return torch.full(shape, -7, dtype=dtype, device=device)


@pytest.mark.parametrize(
    "tokens,experts,top_k,block_m,masked",
    [(1, 4, 2, 16, 0), (37, 8, 3, 16, 5), (70, 130, 8, 32, 9), (5, 5, 2, 4, 3)],
)
def test_triton_alignment_equals_torch(tokens, experts, top_k, block_m, masked):
    gen = torch.Generator().manual_seed(tokens * 1000 + experts)
    # Distinct experts per token (as a router gives), some slots masked with -1.
    ti = torch.stack([torch.randperm(experts, generator=gen)[:top_k] for _ in range(tokens)])
    ti = ti.to(torch.int32)
    flat = ti.view(-1)
    flat[torch.randperm(flat.numel(), generator=gen)[:masked]] = -1
    counters = torch.full((23,), 5, dtype=torch.int32)
    got = align_tokens_triton(ti, experts, block_m, counters=counters, empty=_poisoned)
    ref = align_tokens(ti, experts, block_m, exact=False)
    assert torch.equal(got.num_padded, ref.num_padded)
    assert torch.equal(got.sorted_ids, ref.sorted_ids)
    assert torch.equal(got.block_expert, ref.block_expert)
    assert (counters == 0).all()
