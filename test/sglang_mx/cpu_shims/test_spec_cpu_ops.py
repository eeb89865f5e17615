"""The torch versions of the sgl_kernel CPU ops EAGLE (MTP) calls on a CPU box
(`sglang_mx/_cpu_shims/spec_ops.py`) agree with SGLang 0.5.23's own Triton kernels of the same
contract, run on the CPU through the Triton interpreter (TRITON_INTERPRET=1, test/conftest.py),
on fresh random batches: KV-slot bookkeeping, bonus tokens, the draft tree and its greedy
verification. Exact equality: these are integer index ops."""

from __future__ import annotations

import pytest
import torch
from sglang_mx._cpu_shims import spec_ops

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
POOL = 96


def batch(bs: int, max_len: int = 6):
    rows = torch.randperm(8)[:bs]
    start = torch.randint(0, 40, (bs,))
    end = start + torch.randint(1, max_len, (bs,))
    return rows, start, end


@pytest.mark.parametrize("bs", [1, 3, 5])
def test_req_to_token_and_extend_cache_locs(bs):
    from sglang.kernels.ops.speculative.cache_locs import assign_extend_cache_locs
    from sglang.srt.mem_cache.allocation import assign_req_to_token_pool
    from sglang.srt.utils import next_power_of_2

    rows, start, end = batch(bs)
    n = int((end - start).sum())
    locs = torch.randint(0, 10_000, (n,))
    ours, theirs = torch.zeros(8, POOL, dtype=torch.int32), torch.zeros(8, POOL, dtype=torch.int32)
    spec_ops.assign_req_to_token_pool_cpu(rows, ours, start, end, locs, POOL)
    assign_req_to_token_pool[(bs,)](rows, theirs, start, end, locs, POOL, next_power_of_2(bs))
    assert torch.equal(ours, theirs) and int((ours != 0).sum()) > 0

    table = torch.randint(0, 10_000, (8, POOL), dtype=torch.int32)
    got, want = torch.full((n,), -1), torch.full((n,), -1)
    spec_ops.assign_extend_cache_locs_cpu(rows, table, start, end, got, POOL)
    assign_extend_cache_locs[(bs,)](rows, table, start, end, want, POOL, next_power_of_2(bs))
    assert torch.equal(got, want) and bool((got >= 0).all())


def test_draft_cache_locs_bonus_tokens_and_accepted_slots():
    from sglang.kernels.ops.speculative.cache_locs import assign_draft_cache_locs_contiguous
    from sglang.kernels.ops.speculative.eagle import fill_accept_out_cache_loc, fill_bonus_tokens
    from sglang.srt.utils import next_power_of_2

    bs, topk, cols = 3, 2, 3
    rows, seq, _ = batch(bs)
    table = torch.randint(0, 10_000, (8, POOL), dtype=torch.int32)
    got, want = torch.full((bs * topk * cols,), -1), torch.full((bs * topk * cols,), -1)
    spec_ops.assign_draft_cache_locs_contiguous_cpu(rows, table, seq, got, POOL, topk, cols)
    assign_draft_cache_locs_contiguous[(bs,)](rows, table, seq, want, POOL, topk, cols, BS=bs)
    assert torch.equal(got, want) and bool((got >= 0).all())

    width = 4
    tokens = torch.randint(0, 2048, (bs, width))
    lens = torch.randint(1, width + 1, (bs,))
    got, want = torch.zeros(bs, dtype=torch.int64), torch.zeros(bs, dtype=torch.int64)
    spec_ops.fill_bonus_tokens_cpu(tokens, lens, got, width)
    fill_bonus_tokens[(bs,)](tokens, lens, want, width)
    assert torch.equal(got, want)

    accept = torch.randint(0, bs * width, (bs * width,), dtype=torch.int32)
    accept[torch.rand(bs * width) < 0.4] = -1
    loc = torch.randint(0, 10_000, (bs * width,))
    kept = int((accept != -1).sum())
    got, want = torch.full((kept,), -7), torch.full((kept,), -7)
    spec_ops.fill_accept_out_cache_loc_cpu(accept, loc, got)
    size = accept.numel()
    fill_accept_out_cache_loc[(size,)](accept, loc, want, next_power_of_2(size))
    assert torch.equal(got, want)


def tree_inputs(bs: int, topk: int, depth: int, n: int):
    width = topk * (depth - 1) + 1
    parents = torch.randint(0, topk * width, (bs, width))
    parents[:, 0] = -1
    selected = torch.stack([torch.randperm(topk * width)[: n - 1] for _ in range(bs)])
    seq = torch.randint(3, 9, (bs,))
    return parents, selected, seq


def build(fn, parents, selected, seq, topk, depth, n, mode):
    bs = seq.shape[0]
    size = int(((seq + n) * n).sum()) if mode == 0 else bs * n * n
    out = {
        "tree_mask": torch.zeros(size, dtype=torch.bool),
        "positions": torch.zeros(bs * n, dtype=torch.int64),
        "retrive_index": torch.full((bs, n), -1, dtype=torch.int64),
        "retrive_next_token": torch.full((bs, n), -1, dtype=torch.int64),
        "retrive_next_sibling": torch.full((bs, n), -1, dtype=torch.int64),
    }
    fn(parents, selected, seq, *out.values(), topk, depth, n, mode)
    return out


@pytest.mark.parametrize("mode", [0, 1], ids=["full-mask", "qlen-only"])
@pytest.mark.parametrize("topk, depth, n", [(1, 3, 4), (2, 3, 5), (4, 2, 6)])
def test_draft_tree_and_greedy_verify(mode, topk, depth, n):
    from sglang.kernels.ops.speculative.spec_tree import (
        TreeMaskMode,
        sgl_build_tree_kernel_triton,
        verify_tree_greedy_triton,
    )

    bs = 3
    parents, selected, seq = tree_inputs(bs, topk, depth, n)
    args = (parents, selected, seq, topk, depth, n, mode)
    ours = build(spec_ops.build_tree_kernel_efficient_cpu, *args)
    theirs = build(lambda *a: sgl_build_tree_kernel_triton(*a[:-1], TreeMaskMode(a[-1])), *args)
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key

    spec = depth + 1
    candidates = torch.randint(0, 3, (bs, n))  # a 3-token vocabulary: drafts often match
    target = torch.randint(0, 3, (bs, n))
    results = []
    for fn in (spec_ops.verify_tree_greedy_cpu, verify_tree_greedy_triton):
        predicts = torch.full((bs * n,), -1, dtype=torch.int32)
        accept_index = torch.full((bs, spec), -1, dtype=torch.int32)
        accept_num = torch.zeros(bs, dtype=torch.int32)
        fn(predicts, accept_index, accept_num, candidates, ours["retrive_index"],
           ours["retrive_next_token"], ours["retrive_next_sibling"], target)  # fmt: skip
        results.append((predicts, accept_index, accept_num))
    for got, want in zip(*results, strict=True):
        assert torch.equal(got, want)
