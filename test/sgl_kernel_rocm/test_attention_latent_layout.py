"""MLA / DSA decode over SGLang's two FP8 latent-row layouts (latent_layout.py), through the
interpreter, against the float64 reference of the bytes in the cache; and the layouts' own pack
and unpack.

- packed FP8 rows (656 B: FP8 c_kv, an fp32 scale per 128 values, bf16 k_pe; SGLang off HIP);
- plain FP8 rows with scale 1 (SGLang on HIP: e4m3fn on gfx950, e4m3fnuz on gfx942).

Tolerance of the kernel checks: assert_bf16_close, 2^-7 of the largest output + 1e-4. In the
interpreter the kernel dequantizes a packed tile in fp32 (code x scale x 2^bias: one fp32
rounding, 2^-24) and runs fp32 dots (UPCAST), reading exactly the bytes the reference reads, so
the bf16 output's rounding (the interpreter's store truncates: up to 2^-7 relative) dominates.
"""

from __future__ import annotations

import pytest
import torch
from attention_support import assert_bf16_close
from sgl_kernel_rocm.attention import (
    dsa_sparse_decode,
    dsa_sparse_decode_ref,
    mla_decode,
    mla_decode_ref,
)
from sgl_kernel_rocm.attention.latent_layout import FP8_MAX, LatentLayout
from sgl_kernel_rocm.attention.mla_decode import TILE_VARIANTS

HEADS = 16
D_QK = 576
PACKED = LatentLayout.packed_fp8()


def _gen() -> torch.Generator:
    """Fresh inputs each run, replayable: seeded from the test's seed (conftest)."""
    return torch.Generator().manual_seed(int(torch.randint(2**31, ())))


def _latent(g: torch.Generator, *shape: int) -> torch.Tensor:
    """GLM-like latents: per-column magnitudes over three decades, so the 128-value groups get
    different scales and small values sit in e4m3's subnormal range of their group."""
    col = torch.logspace(-2, 1, D_QK)[torch.randperm(D_QK, generator=g)]
    return torch.randn(*shape, D_QK, generator=g) * col


def _paged(g: torch.Generator, page: int, lens: list[int], layout: LatentLayout, dtype):
    max_pages = -(-max(lens) // page)
    pool = len(lens) * max_pages + 2
    cache = layout.pack(_latent(g, pool, page), dtype)
    bt = torch.randperm(pool, generator=g)[: len(lens) * max_pages].view(len(lens), max_pages)
    return cache, bt.to(torch.int32), torch.tensor(lens, dtype=torch.int32)


def test_packed_row_geometry_is_sglangs():
    """656 bytes: 512 FP8 codes, 4 fp32 scales at byte 512, 64 bf16 rope values at byte 528
    (SGLang's calculate_mla_kv_cache_dim: kv_lora_rank + kv_lora_rank / 128 * 4 + 64 * 2)."""
    assert (PACKED.row_width, PACKED.scale_offset, PACKED.rope_offset) == (656, 512, 528)
    assert (PACKED.groups, LatentLayout.plain().row_width) == (4, 576)
    c = PACKED.kernel_constexprs(torch.empty(0, dtype=torch.uint8), "ptx")
    # A bit-moved e4m3fn code is worth value * 2^-120: the group scale gets 2^120 back.
    assert (c["PACKED"], c["ROPE_OFF"], c["SCALE_OFF"], c["GROUP"]) == (True, 528, 512, 128)
    assert (c["NOPE_UNBIAS"], c["Q_LIFT"], c["KV_UNSCALE"]) == (2.0**120, 1.0, 1.0)


def test_pack_unpack_round_trip_within_fp8_rounding():
    """unpack(pack(x)): k_pe exactly its bf16; each latent value within e4m3's rounding of its
    group: half an ulp, 2^-4 relative for normals, and an absolute 2^-10 x scale below e4m3's
    smallest normal (2^-6 x scale), where the ulp stops shrinking."""
    g = _gen()
    x = _latent(g, 300)
    back = PACKED.unpack(PACKED.pack(x))
    assert torch.equal(back[:, 512:], x[:, 512:].to(torch.bfloat16).double())
    grouped = x[:, :512].double().view(300, 4, 128)
    scale = grouped.abs().amax(-1, keepdim=True) / FP8_MAX
    err = (back[:, :512].view(300, 4, 128) - grouped).abs()
    bound = torch.maximum(grouped.abs() * 2.0**-4, scale * 2.0**-10) * (1 + 1e-6)
    assert (err <= bound).all(), float((err / bound).max())
    assert (err > 0).any()  # FP8 did round: the rows are not stored in bf16


@pytest.mark.parametrize("page", [16, 64])
@pytest.mark.parametrize("splits", [1, 3])
def test_mla_and_dsa_read_packed_rows(page, splits):
    g = _gen()
    lens = [1, 45, 190]
    kv, bt, seq = _paged(g, page, lens, PACKED, None)
    q = torch.randn(3, HEADS, D_QK, generator=g).to(torch.bfloat16)
    out = torch.full((3, HEADS, 512), float("nan"), dtype=torch.bfloat16)
    mla_decode(q, kv, bt, seq, num_splits=splits, out=out, layout=PACKED)
    assert_bf16_close(out, mla_decode_ref(q, kv, bt, seq, layout=PACKED), "dense")
    idx = torch.randint(-1, 200, (3, 48), generator=g, dtype=torch.int32)
    sparse = torch.full((3, HEADS, 512), float("nan"), dtype=torch.bfloat16)
    # SGLang's pool hands the rows over as float8_e4m3fn bytes: the same kernel input.
    fp8_view = kv.view(torch.float8_e4m3fn)
    dsa_sparse_decode(q, fp8_view, bt, seq, idx, num_splits=splits, out=sparse, layout=PACKED)
    ref = dsa_sparse_decode_ref(q, kv, bt, seq, idx, layout=PACKED)
    assert_bf16_close(sparse, ref, "sparse")


@pytest.mark.parametrize("variant", ["keys_on_m", "prefetch"])
def test_packed_rows_under_the_tile_variants(variant):
    """The GPU tables' other tiles (keys on the MMA's M side, prefetched page ids) at 64 heads
    in one program, packed rows."""
    g = _gen()
    kv, bt, seq = _paged(g, 64, [37, 130], PACKED, None)
    q = torch.randn(2, 64, D_QK, generator=g).to(torch.bfloat16)
    tile = {"BLOCK_N": 32, "BLOCK_H": 64, **TILE_VARIANTS[variant]}
    out = mla_decode(q, kv, bt, seq, num_splits=2, tile_config=tile, layout=PACKED)
    assert_bf16_close(out, mla_decode_ref(q, kv, bt, seq, layout=PACKED))


@pytest.mark.parametrize(
    "fp8", [torch.float8_e4m3fn, torch.float8_e4m3fnuz], ids=["e4m3fn", "e4m3fnuz"]
)
def test_plain_fp8_rows_at_scale_one(fp8):
    """SGLang's HIP rows: the latent cast to FP8 (fnuz on gfx942), no scale (kv_scale None)."""
    g = _gen()
    plain = LatentLayout.plain()
    kv, bt, seq = _paged(g, 64, [70, 200], plain, fp8)
    q = torch.randn(2, HEADS, D_QK, generator=g).to(torch.bfloat16)
    out = torch.full((2, HEADS, 512), float("nan"), dtype=torch.bfloat16)
    mla_decode(q, kv, bt, seq, out=out, num_splits=2)
    assert_bf16_close(out, mla_decode_ref(q, kv, bt, seq))
    idx = torch.randint(-1, 200, (2, 64), generator=g, dtype=torch.int32)
    sparse = dsa_sparse_decode(q, kv, bt, seq, idx)
    assert_bf16_close(sparse, dsa_sparse_decode_ref(q, kv, bt, seq, idx))


def test_packed_reference_reads_the_scales():
    """The reference the kernel is held to differs from reading the codes unscaled (a check
    that passes with the scales ignored would check nothing)."""
    g = _gen()
    kv, bt, seq = _paged(g, 64, [100], PACKED, None)
    q = torch.randn(1, HEADS, D_QK, generator=g).to(torch.bfloat16)
    out = mla_decode(q, kv, bt, seq, layout=PACKED)
    scales = kv[..., 512:528].clone()
    kv[..., 512:528] = torch.ones(4).view(torch.uint8)  # every scale 1.0
    unscaled = mla_decode_ref(q, kv, bt, seq, layout=PACKED)
    kv[..., 512:528] = scales
    assert (out.double() - unscaled).abs().max() > 10 * 2.0**-7 * unscaled.abs().max()


def test_bad_layout_inputs_are_refused_with_a_reason():
    g = torch.Generator().manual_seed(0)
    kv, bt, seq = _paged(g, 16, [20], PACKED, None)
    q = torch.randn(1, HEADS, D_QK, generator=g).to(torch.bfloat16)
    with pytest.raises(ValueError, match="pass no kv_scale"):
        mla_decode(q, kv, bt, seq, layout=PACKED, kv_scale=0.5)
    with pytest.raises(ValueError, match="packed FP8 layout"):
        mla_decode(q, kv, bt, seq)  # 656-byte rows read as plain ones
    with pytest.raises(ValueError, match="uint8 or float8_e4m3fn"):
        mla_decode(q, kv.to(torch.int16), bt, seq, layout=PACKED)
    with pytest.raises(ValueError, match="576 wide"):
        mla_decode(q, kv[..., :600], bt, seq, layout=LatentLayout.plain())
    with pytest.raises(ValueError, match="group size"):
        LatentLayout.packed_fp8(group=100)
