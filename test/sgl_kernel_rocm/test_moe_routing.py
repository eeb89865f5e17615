"""MoE routers against per-token loops written from the definitions."""

from __future__ import annotations

import pytest
import torch
from sgl_kernel_rocm.moe.routing import grouped_sigmoid_topk, softmax_topk


def _loop_grouped(logits, bias, k, n_group, topk_group, renorm, rsf):
    """Per-token, per-group oracle of noaux_tc routing, written without batching."""
    weights, ids = [], []
    per_group = logits.shape[1] // n_group
    for row in range(logits.shape[0]):
        scores = torch.sigmoid(logits[row].double())
        biased = scores + bias.double()
        group_score = [
            sorted(biased[g * per_group : (g + 1) * per_group].tolist())[-2:]
            for g in range(n_group)
        ]
        ranked = sorted(range(n_group), key=lambda g: -sum(group_score[g]))[:topk_group]
        allowed = [e for g in ranked for e in range(g * per_group, (g + 1) * per_group)]
        chosen = sorted(allowed, key=lambda e: -biased[e].item())[:k]
        w = scores[chosen]
        if renorm:
            w = w / w.sum()
        weights.append((w * rsf).tolist())
        ids.append(chosen)
    return torch.tensor(weights), torch.tensor(ids)


@pytest.mark.parametrize("renorm", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_topk(renorm, dtype):
    # Distinct logits 0.02 apart (above the bf16 ulp up to 2.9), so top-k has no ties.
    logits = (torch.randperm(16 * 9).reshape(9, 16).float() / 50).to(dtype)
    w, ids = softmax_topk(logits, 4, renorm)
    assert w.dtype == torch.float32 and ids.dtype == torch.int32
    probs = torch.softmax(logits.float(), -1)
    for t in range(9):
        expect = sorted(range(16), key=lambda e: -probs[t, e].item())[:4]
        assert ids[t].tolist() == expect
        ref = probs[t, expect]
        ref = ref / ref.sum() if renorm else ref
        # fp32 softmax on both sides; only summation order differs.
        torch.testing.assert_close(w[t], ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "n_experts,k,n_group,topk_group,renorm,rsf",
    [
        (16, 4, 4, 2, True, 2.5),
        (16, 4, 1, 1, True, 1.0),
        (32, 8, 8, 4, False, 2.5),
        (8, 2, 8, 2, True, 1.0),
    ],
)
def test_grouped_sigmoid_topk(n_experts, k, n_group, topk_group, renorm, rsf):
    logits = torch.randn(7, n_experts)
    bias = torch.randn(n_experts) * 0.3
    w, ids = grouped_sigmoid_topk(logits, bias, k, n_group, topk_group, renorm, rsf)
    ref_w, ref_ids = _loop_grouped(logits, bias, k, n_group, topk_group, renorm, rsf)
    assert ids.dtype == torch.int32 and w.dtype == torch.float32
    assert torch.equal(ids.long(), ref_ids)
    # fp32 vs the oracle's fp64: a few fp32 ulps.
    torch.testing.assert_close(w.double(), ref_w.double(), rtol=1e-5, atol=1e-6)
    if renorm:
        torch.testing.assert_close(w.sum(-1), torch.full((7,), rsf), rtol=1e-5, atol=0)


def test_router_errors_name_the_problem():
    with pytest.raises(ValueError, match="n_group"):
        grouped_sigmoid_topk(torch.randn(2, 10), None, 2, n_group=3, topk_group=1)
    with pytest.raises(ValueError, match="top-k"):
        softmax_topk(torch.randn(2, 4), 5)
