"""The decode wrappers read no device value on the host (no .item()/int()/bool()/.tolist() of a
tensor): a host sync per layer on a GPU, and something a CUDA graph cannot capture. Every call
runs inside sglang_mx_lab.testing.host_sync.forbid_host_sync (Triton interpreter, small shapes) and
its result is checked against the reference, so the kernels really ran."""

from __future__ import annotations

import pytest
import torch
from attention_support import assert_bf16_close, scattered_pages
from sgl_kernel_rocm.attention import (
    dsa_indexer,
    dsa_sparse_decode,
    dsa_sparse_decode_ref,
    gqa_decode,
    gqa_decode_ref,
    mla_decode,
    mla_decode_ref,
)
from sglang_mx_lab.testing.host_sync import HostSyncError, forbid_host_sync

LENS = [5, 70]


def _paged(g, dims, dtype, page=16, pool=12):
    cache, bt = scattered_pages(g, pool, page, dims, dtype, 2, 5)
    return cache, bt, torch.tensor(LENS, dtype=torch.int32)


def test_guard_catches_the_syncs_it_forbids():
    seq = torch.tensor(LENS)
    for read in (lambda: int(seq.max()), lambda: seq.max().item(), lambda: seq.tolist(),
                 lambda: bool((seq > 0).all()), lambda: float(seq[0])):  # fmt: skip
        with pytest.raises(HostSyncError), forbid_host_sync():
            read()
    with forbid_host_sync(host=[seq]):
        assert seq.tolist() == LENS  # host metadata (SGLang's seq_lens_cpu) may be read


@pytest.mark.parametrize("splits", [None, 3])
@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float8_e4m3fn], ids=["bf16", "fp8"])
def test_gqa_decode_no_host_sync(splits, kv_dtype):
    g = torch.Generator().manual_seed(1)
    k, bt, seq = _paged(g, (2, 32), kv_dtype)
    v, _, _ = _paged(g, (2, 32), kv_dtype)
    q = torch.randn(2, 8, 32, generator=g).to(torch.bfloat16)
    scale = torch.tensor([0.25, 0.5])  # a device-resident per-head scale
    with forbid_host_sync():
        out, lse = gqa_decode(q, k, v, bt, seq, k_scale=scale, v_scale=scale, num_splits=splits,
                              return_lse=True, sliding_window=40)  # fmt: skip
        out2 = gqa_decode(q, k, v, bt, seq, k_scale=0.25, v_scale=0.5, max_seq_len=70)
    assert_bf16_close(
        out, gqa_decode_ref(q, k, v, bt, seq, k_scale=scale, v_scale=scale, sliding_window=40)
    )
    assert torch.isfinite(lse).all()
    assert_bf16_close(out2, gqa_decode_ref(q, k, v, bt, seq, k_scale=0.25, v_scale=0.5))


@pytest.mark.parametrize(("splits", "tile"), [(None, "table"), (2, "keys_on_m+prefetch")])
def test_mla_and_dsa_decode_no_host_sync(splits, tile):
    from sgl_kernel_rocm.attention.mla_decode import TILE_VARIANTS

    g = torch.Generator().manual_seed(2)
    kv, bt, seq = _paged(g, (576,), torch.float8_e4m3fn)
    q = torch.randn(2, 16, 576, generator=g).to(torch.bfloat16)
    scale = torch.tensor(0.25)  # device-resident per-tensor scale: read by the kernel
    idx = torch.randint(-2, 80, (2, 48), generator=g, dtype=torch.int32)
    with forbid_host_sync():
        out, lse = mla_decode(q, kv, bt, seq, kv_scale=scale, num_splits=splits, return_lse=True,
                              tile_config=TILE_VARIANTS[tile])  # fmt: skip
        sparse = dsa_sparse_decode(q, kv, bt, seq, idx, kv_scale=scale, num_splits=splits,
                                   max_seq_len=70, tile_config=TILE_VARIANTS[tile])  # fmt: skip
    assert_bf16_close(out, mla_decode_ref(q, kv, bt, seq, kv_scale=scale))
    assert torch.isfinite(lse).all()
    assert_bf16_close(sparse, dsa_sparse_decode_ref(q, kv, bt, seq, idx, kv_scale=scale))


def test_dsa_indexer_no_host_sync():
    g = torch.Generator().manual_seed(3)
    k, bt, seq = _paged(g, (128,), torch.float8_e4m3fn)
    k_scale = torch.rand(k.shape[:2], generator=g) + 0.05
    q = torch.randn(2, 32, 128, generator=g).to(torch.bfloat16)
    w = torch.randn(2, 32, generator=g) * 128**-0.5
    with forbid_host_sync():
        wide = dsa_indexer(q, w, k, k_scale, bt, seq, top_k=16)
        tight = dsa_indexer(q, w, k, k_scale, bt, seq, top_k=16, max_seq_len=70)
        radix = dsa_indexer(q, w, k, k_scale, bt, seq, top_k=16, select="radix")
    assert torch.equal(wide, tight)
    assert torch.equal(radix.sort(dim=1).values, wide.sort(dim=1).values)  # same picks
    for b, n in enumerate(LENS):
        chosen = wide[b][wide[b] >= 0]
        assert chosen.numel() == min(16, n) and (chosen < n).all()
