"""MLA / DSA decode's tile variants, chosen per arch by the config tables, vs float64 references
(CPU, Triton interpreter): keys on the MMA's M side (`KEYS_ON_M`: scores [N, H], accumulator
[512, H], so TP8's 8 heads pad only the N side) and the next tile's page ids / index entries
fetched before the current tile's math (`PREFETCH`)."""

from __future__ import annotations

import pytest
import torch
from attention_support import assert_bf16_close, record_mla_launches, scattered_pages
from sgl_kernel_rocm.attention import (
    dsa_sparse_decode,
    dsa_sparse_decode_ref,
    mla_decode,
    mla_decode_ref,
)
from sgl_kernel_rocm.attention.mla_decode import TILE_VARIANTS

D_QK = 576


@pytest.mark.parametrize("variant", [v for v in TILE_VARIANTS if v != "table"])
@pytest.mark.parametrize("heads", [8, 64])  # GLM-5.2 per rank: TP8, DP attention
@pytest.mark.parametrize(
    ("kv_dtype", "page"),
    [(torch.float8_e4m3fn, 64), (torch.bfloat16, 16)],
    ids=["fp8-page64", "bf16-page16"],  # page 64: one page id per 32-key tile; 16: one per key
)
def test_mla_and_dsa_tile_variants(monkeypatch, variant, heads, kv_dtype, page):
    tile = {"BLOCK_N": 32, "BLOCK_H": 64, **TILE_VARIANTS[variant]}
    launched = record_mla_launches(monkeypatch)
    lens = [1, 45, 190, 300]  # ragged: a lone key, partial tiles, several pages
    g = torch.Generator().manual_seed(heads + page + len(variant))
    max_pages = -(-max(lens) // page)
    kv, bt = scattered_pages(g, 4 * max_pages + 2, page, (D_QK,), kv_dtype, 4, max_pages)
    seq = torch.tensor(lens, dtype=torch.int32)
    q = torch.randn(4, heads, D_QK, generator=g).to(torch.bfloat16)
    scale = 0.25 if kv_dtype == torch.float8_e4m3fn else None
    out = torch.full((4, heads, 512), float("nan"), dtype=torch.bfloat16)
    mla_decode(q, kv, bt, seq, kv_scale=scale, num_splits=3, out=out, tile_config=tile)
    assert_bf16_close(out, mla_decode_ref(q, kv, bt, seq, kv_scale=scale), "dense")

    idx = torch.randint(-1, 310, (4, 80), generator=g, dtype=torch.int32)  # -1, out of range
    idx[1, :10] = 7  # duplicates
    idx[0] = -1  # nothing valid: zeros
    sparse = torch.full((4, heads, 512), float("nan"), dtype=torch.bfloat16)
    dsa_sparse_decode(
        q, kv, bt, seq, idx, kv_scale=scale, num_splits=2, out=sparse, tile_config=tile
    )
    assert_bf16_close(sparse, dsa_sparse_decode_ref(q, kv, bt, seq, idx, kv_scale=scale), "dsa")
    assert torch.equal(sparse[0], torch.zeros_like(sparse[0]))
    # Both launches ran the variant's tile, not the table's (either would match the reference).
    want = {"BLOCK_N": 32, "BLOCK_H": max(16, heads), **TILE_VARIANTS[variant]}
    assert [{k: d[k] for k in want} for d in launched] == [want, want], launched
    assert [(d["SPARSE"], d["grid"]) for d in launched] == [
        (False, (4, 1, 3)), (True, (4, 1, 2))]  # fmt: skip


def test_tile_config_names_only_launch_entries():
    q = torch.zeros(1, 8, D_QK, dtype=torch.bfloat16)
    kv = torch.zeros(2, 64, D_QK, dtype=torch.bfloat16)
    bt, seq = torch.zeros(1, 1, dtype=torch.int32), torch.ones(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="KEYS_ON_N"):
        mla_decode(q, kv, bt, seq, tile_config={"KEYS_ON_N": True})
