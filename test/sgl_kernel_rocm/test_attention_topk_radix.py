"""The indexer's radix top-k (attention/topk_radix.py) vs a torch selection (CPU, interpreter):
the same positions as a stable sort by (score desc, position asc), ties at the k-th score
included, -inf padding and short rows, negative scores."""

from __future__ import annotations

import pytest
import torch
from sgl_kernel_rocm.attention.topk_radix import select_topk_radix


def _expected(scores: torch.Tensor, lens: list[int], k: int) -> list[list[int]]:
    """Per row: the first k positions of a stable sort by score descending among finite scores
    within the row's length (ties keep position order)."""
    rows = []
    for b, n in enumerate(lens):
        s = scores[b, :n].double()
        pos = torch.arange(n)[torch.isfinite(s)]
        order = torch.sort(-s[pos], stable=True).indices
        rows.append(pos[order][:k].tolist())
    return rows


@pytest.mark.parametrize("k", [1, 7, 64, 300])
def test_radix_topk_matches_a_stable_sort(k):
    g = torch.Generator().manual_seed(k)
    lens = [0, 5, 130, 257, 300]
    scores = torch.randn(len(lens), 300, generator=g)
    scores[1] = scores[1] - 10.0  # all negative
    scores[2, ::3] = 0.5  # many ties (and ties at the k-th score for some k)
    scores[3] = torch.round(scores[3] * 4) / 4  # coarse values: ties everywhere
    scores[3, 100:120] = float("-inf")  # padding inside the length is never chosen
    scores[4, :] = 1.0  # one value: ties decide everything
    scores[4, 299] = 2.0
    for b, n in enumerate(lens):
        scores[b, n:] = float("-inf")
    seq = torch.tensor(lens, dtype=torch.int32)
    idx = select_topk_radix(scores, seq, k)
    assert idx.shape == (len(lens), k) and idx.dtype == torch.int32
    for b, want in enumerate(_expected(scores, lens, k)):
        got = idx[b]
        assert sorted(got[: len(want)].tolist()) == sorted(want), (b, k)
        assert (got[len(want) :] == -1).all(), (b, k)


def test_radix_topk_rejects_bad_input():
    with pytest.raises(ValueError, match="fp32"):
        select_topk_radix(
            torch.zeros(2, 8, dtype=torch.float16), torch.ones(2, dtype=torch.int32), 2
        )
    with pytest.raises(ValueError, match="seq_lens"):
        select_topk_radix(torch.zeros(2, 8), torch.ones(3, dtype=torch.int32), 2)
    with pytest.raises(ValueError, match="top_k"):
        select_topk_radix(torch.zeros(2, 8), torch.ones(2, dtype=torch.int32), 0)


def test_indexer_with_radix_select_picks_the_top_scores():
    """dsa_indexer(select="radix"): the score kernel, then the radix select, checked against
    the float64 scores like the torch select (test_attention_mla.py)."""
    from attention_support import assert_topk_selection, scattered_pages
    from sgl_kernel_rocm.attention import dsa_indexer, dsa_indexer_scores_ref

    g = torch.Generator().manual_seed(5)
    lens = [1, 40, 257]
    k, bt = scattered_pages(g, 3 * 5 + 2, 64, (128,), torch.float8_e4m3fn, 3, 5)
    k_scale = torch.rand(k.shape[:2], generator=g) + 0.05
    q = torch.randn(3, 32, 128, generator=g).to(torch.bfloat16)
    w = torch.randn(3, 32, generator=g) * 128**-0.5
    seq = torch.tensor(lens, dtype=torch.int32)
    idx = dsa_indexer(q, w, k, k_scale, bt, seq, top_k=64, select="radix")
    ref = dsa_indexer_scores_ref(q, w, k, k_scale, bt, seq)
    assert_topk_selection(idx, ref, lens, 64, slack=2e-4)
    with pytest.raises(ValueError, match="select"):
        dsa_indexer(q, w, k, k_scale, bt, seq, top_k=64, select="bitonic")
