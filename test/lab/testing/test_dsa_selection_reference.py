"""The format reference the selection tests judge by (sglang_mx_lab.testing.dsa_selection): its
e4m3 rounding against torch's own float8_e4m3fn cast (an implementation of the OCP format outside
this project), its per-token scale against the scale rule, and its overlap on hand-made rows."""

from __future__ import annotations

import pytest
import torch
from sglang_mx_lab.testing.dsa_selection import (
    E4M3_MAX,
    IndexKeyHistory,
    e4m3,
    format_scores,
    fp8_index_key,
    fp8_index_key_pages,
    latest_keys,
    selection_overlap,
)


def test_e4m3_rounds_as_torch_casts():
    """Every binade from the subnormals to 448, the exact midpoints between neighbours (ties go
    to the even mantissa), zero and signs."""
    seed = int(torch.randint(2**31, ()))
    g = torch.Generator().manual_seed(seed)
    grid = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).double()
    grid = grid[torch.isfinite(grid)].unique()  # every e4m3 value (+-0 once), ascending
    mids = (grid[1:] + grid[:-1]) / 2
    spread = torch.exp2(torch.rand(5_000, generator=g, dtype=torch.float64) * 19 - 10)
    # float32 values, as the index keys are before FP8: torch casts float64 to e4m3 through
    # float32, so a float64 within float32's rounding of a midpoint rounds twice there (about
    # one seed in 600: 53.99999969... -> 54.0 -> 56, where the nearest e4m3 value is 52)
    spread = spread.float().double()
    x = torch.cat([grid, mids, spread * torch.sign(torch.randn(5_000, generator=g))])
    x = x.clamp(-E4M3_MAX, E4M3_MAX)
    torch.testing.assert_close(e4m3(x), x.to(torch.float8_e4m3fn).double(), rtol=0, atol=0,
                               msg=lambda m: f"{m}\nseed {seed}")  # fmt: skip
    with pytest.raises(ValueError, match="448"):
        e4m3(torch.tensor([500.0]))


def test_index_key_scale_is_the_smallest_power_of_two_that_fits():
    g = torch.Generator().manual_seed(int(torch.randint(2**31, ())))
    key = torch.randn(512, 128, generator=g) * torch.exp2(torch.randint(-20, 12, (512, 1)))
    key[0] = 0.0  # amax floored at 1e-4
    deq = fp8_index_key(key)
    amax = key.double().abs().amax(1).clamp_min(1e-4)
    scale = torch.exp2(torch.ceil(torch.log2(amax / E4M3_MAX)))  # the rule, another way
    assert torch.equal(deq, e4m3(key.double() / scale[:, None]) * scale[:, None])
    assert bool((deq.abs().amax(1) <= E4M3_MAX * scale).all())
    rel = (deq - key.double()).abs().amax(1) / amax
    assert float(rel[1:].max()) <= 2**-4  # half a step of 3 mantissa bits at the row's top
    # as pages (the form a kernel reads): slot s holds key s's e4m3 values and scale
    slots = torch.randperm(40 * 16, generator=g)[:512]
    pages, page_scales = fp8_index_key_pages(key, slots, 40, 16)
    assert pages.shape == (40, 16, 128) and page_scales.shape == (40, 16)
    flat = pages.view(-1, 128).double() * page_scales.view(-1, 1).double()
    assert torch.equal(flat[slots], deq)
    assert torch.equal(page_scales.view(-1)[slots].double(), scale)
    assert int(flat.abs().sum(1).gt(0).sum()) <= 512  # nothing written outside the slots


def test_overlap_counts_ties_and_rejects_the_latest_keys():
    """Five one-head keys scoring 4, 1, 4, 1, 0 (relu of -8) for both queries (positions 3, 4)."""
    history = IndexKeyHistory()
    history.write(0, torch.arange(5), torch.tensor([[4.0, 0], [1, 0], [4, 0], [1, 0], [-8, 0]]))
    q, w, pos = torch.tensor([[[1.0, 0]], [[1.0, 0]]]), torch.ones(2, 1), torch.tensor([3, 4])
    scores = format_scores(q, w, history.upto(0, 4), pos)
    assert scores.tolist() == [[4, 1, 4, 1, float("-inf")], [4, 1, 4, 1, 0]]
    # top-3: keys 0 and 2, then key 1 or key 3 (a tie: either is right)
    assert selection_overlap(torch.tensor([[0, 2, 1], [2, 0, 3]]), scores, 3).tolist() == [1, 1]
    # a key past the query's position, and an empty place, are not accepted
    assert (
        selection_overlap(torch.tensor([[0, 2, 4], [0, 2, -1]]), scores, 3).tolist()
        == [pytest.approx(2 / 3)] * 2
    )
    # top-2 is keys 0 and 2; the newest two keys are [3, 2] and [4, 3]
    assert latest_keys(pos, 2).tolist() == [[3, 2], [4, 3]]
    assert selection_overlap(latest_keys(pos, 2), scores, 2).tolist() == [0.5, 0.0]
    assert latest_keys(torch.tensor([1]), 3).tolist() == [[1, 0, -1]]
    # a key past the scored width is no key; a position no call wrote is an error
    assert selection_overlap(torch.tensor([[0, 2, 9]]), scores[1:], 3).tolist() == [
        pytest.approx(2 / 3)
    ]
    history.write(0, torch.tensor([7]), torch.ones(1, 2))
    with pytest.raises(ValueError, match=r"positions \[5, 6\]"):
        history.upto(0, 7)
    with pytest.raises(ValueError, match="layer 1"):
        history.upto(1, 0)
