"""Split-K of the fused MoE's gate_up and down GEMMs (moe/_split_k.py) in the interpreter: equal to
the torch reference for split 1 / 2 / 4 with ragged K (splits with fewer or no K blocks), on
both alignment grids, both code paths, W4A4, fp32; config validation. (Determinism under
concurrency, the order-independence of the last-arriver sum, only a GPU run can exercise: the
interpreter runs programs one after another.)"""

from __future__ import annotations

import pytest
import torch
from moe_support import assert_moe_close, poison_buffers
from sgl_kernel_rocm.moe import fused_moe_mxfp4, triton_moe
from sgl_kernel_rocm.moe.config import split_k_of
from sgl_kernel_rocm.moe.synthetic import random_moe_inputs

# H = 320 is 5 K blocks of 64 (splits of 4: 2, 2, 1, 0 blocks); I = 96 is 2 blocks, the second
# half full (EVEN_K off; splits of 4: 1, 1, 0, 0).
TOKENS, EXPERTS, HIDDEN, INTER, TOP_K = 5, 4, 320, 96, 2
BASE = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1}


def _inputs(dtype):
    """Fresh random inputs (the seed drawn from the test's seed, which conftest reports)."""
    seed = int(torch.randint(2**31, ()))
    x, w, tw, ti = random_moe_inputs(TOKENS, EXPERTS, HIDDEN, INTER, TOP_K, dtype=dtype, seed=seed)
    ti.view(-1)[3] = -1  # one masked slot: a token with fewer valid slots arrives fewer times
    return x, w, tw, ti


# Both grid modes with uneven gate_up / down splits and with the widest split (the interpreter
# makes each case cost seconds, so not the full cross product).
@pytest.mark.parametrize(
    "exact_align,split",
    [(True, (1, 2)), (False, (2, 1)), (True, (4, 4)), (False, (4, 4))],
    ids=["exact_grid-g1d2", "worst_case_grid-g2d1", "exact_grid-g4d4", "worst_case_grid-g4d4"],
)
def test_split_k_matches_reference_bf16(monkeypatch, split, exact_align):
    poison_buffers(monkeypatch)
    monkeypatch.setattr(triton_moe, "_EXACT_ALIGN_ON_CPU", exact_align)
    x, w, tw, ti = _inputs(torch.bfloat16)
    shared = torch.randn(TOKENS, HIDDEN).to(torch.bfloat16)
    cfg = BASE | {"SPLIT_K": split[0], "SPLIT_K_DOWN": split[1]}
    out = fused_moe_mxfp4(x, w, tw, ti, backend="triton", path="unpack", config=cfg,
                          shared_output=shared)  # fmt: skip
    ref = fused_moe_mxfp4(x, w, tw, ti, backend="torch", shared_output=shared)
    assert_moe_close(out, ref, shared, TOP_K)


@pytest.mark.parametrize("path,act_quant", [("dot_scaled", "none"), ("unpack", "mxfp4")])
def test_split_k_other_paths_match_reference(monkeypatch, path, act_quant):
    poison_buffers(monkeypatch)
    x, w, tw, ti = _inputs(torch.bfloat16)
    cfg = BASE | {"SPLIT_K": 4, "SPLIT_K_DOWN": 2}
    out = fused_moe_mxfp4(x, w, tw, ti, backend="triton", path=path, act_quant=act_quant,
                          config=cfg)  # fmt: skip
    ref = fused_moe_mxfp4(x, w, tw, ti, backend="torch", act_quant=act_quant)
    assert_moe_close(out, ref, None, TOP_K)


@pytest.mark.parametrize("split", [2, 4])
def test_split_k_fp32_matches_reference_tightly(monkeypatch, split):
    poison_buffers(monkeypatch)
    x, w, tw, ti = _inputs(torch.float32)
    cfg = BASE | {"SPLIT_K": split, "SPLIT_K_DOWN": split}
    out = fused_moe_mxfp4(x, w, tw, ti, backend="triton", path="unpack", config=cfg)
    ref = fused_moe_mxfp4(x, w, tw, ti, backend="torch")
    # fp32 throughout: only the summation order differs (splits summed in split order).
    scale = ref.abs().max().item()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5 * scale)


def test_split_k_config_keys():
    assert split_k_of(BASE) == (1, 1)
    assert split_k_of(BASE | {"SPLIT_K": 4, "SPLIT_K_DOWN": 2}) == (4, 2)
    for bad in (0, 17, 2.0, True, "2"):
        with pytest.raises(ValueError, match="SPLIT_K"):
            split_k_of(BASE | {"SPLIT_K": bad})
    with pytest.raises(ValueError, match="SPLIT_K_DOWN"):
        fused_moe_mxfp4(*_inputs(torch.bfloat16), backend="triton",
                        config=BASE | {"SPLIT_K_DOWN": -1})  # fmt: skip


def test_split_k_launch_grid_and_variants():
    """The cost model's grid of a split GEMM (x SPLIT_K programs, cdiv(K blocks, SPLIT_K)
    iterations, fp32 partial traffic) and the decode-shaping variants (each split keeps at
    least two K blocks)."""
    from sgl_kernel_rocm.compile_check.cases import moe_pair
    from sgl_kernel_rocm.compile_check.costmodel.launches import moe_launches
    from sgl_kernel_rocm.compile_check.decode_shaping import variants

    shape = (256, 6144, 256)
    base = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128, "num_warps": 4, "num_stages": 1}
    g1, d1 = moe_launches(*moe_pair("sm90", base, *shape, "none", "unpack", "k"), *shape, 1)
    split = base | {"SPLIT_K": 4, "SPLIT_K_DOWN": 2}
    gate, down = moe_pair("sm90", split, *shape, "none", "unpack", "k")
    assert dict(gate.constexprs)["SPLIT_K"] == 4 and dict(down.constexprs)["SPLIT_K"] == 2
    assert "splitk4" in gate.label and "splitk2" in down.label
    g4, d2 = moe_launches(gate, down, *shape, 1)
    assert g4.programs == 4 * g1.programs and g4.iters == g1.iters / 4 == 12
    assert d2.programs == 2 * d1.programs and d2.iters == 1
    assert g4.hbm_bytes > g1.hbm_bytes and d2.hbm_bytes > d1.hbm_bytes  # partials counted
    # 48 K blocks of H: splits 1..8; 2 blocks of I: only 1 (a split of one block is not tried).
    got = {(c["SPLIT_K"], c["SPLIT_K_DOWN"]) for c in variants(base, shape)}
    assert got == {(1, 1), (2, 1), (4, 1), (8, 1)}


def test_decode_shaping_picks_the_fastest_variant_that_passes_the_gate():
    from sgl_kernel_rocm.compile_check import decode_shaping as DS

    class Planted:  # split 8 would be fastest but fails the gate (cost None)
        def cost(self, cfg, shape, tokens):
            return {1: 10.0, 2: 6.0, 4: 5.0, 8: None}[cfg["SPLIT_K"]]

    cfgs = [{"SPLIT_K": s} for s in (1, 2, 4, 8)]
    assert DS._best(Planted(), cfgs, None, 1) == ({"SPLIT_K": 4}, 5.0)
    # Within 0.5% of the best, the earlier (fewer splits) variant stays.
    close = type("Close", (), {"cost": lambda self, c, s, t: 5.0 - 0.001 * c["SPLIT_K"]})()
    assert DS._best(close, cfgs, None, 1)[0] == {"SPLIT_K": 1}
    with pytest.raises(RuntimeError, match="passes the gate"):
        DS._best(type("None_", (), {"cost": lambda self, c, s, t: None})(), cfgs, (1, 2, 3), 1)
