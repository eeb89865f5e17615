"""The down GEMM's own tile (config "down", moe.config.down_config): launched with its own
BLOCK_N / BLOCK_K / warps / stages / SWAP_AB (BLOCK_M shared), equal to the torch reference in
the interpreter; validated; compiled, modelled and shaped as its own kernel."""

from __future__ import annotations

import pytest
import torch
from moe_support import assert_moe_close, poison_buffers, record_launches
from sgl_kernel_rocm.moe import fused_moe_mxfp4
from sgl_kernel_rocm.moe.config import down_config
from sgl_kernel_rocm.moe.synthetic import random_moe_inputs

TOKENS, EXPERTS, HIDDEN, INTER, TOP_K = 5, 4, 192, 96, 2
GATE = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1,
        "SWAP_AB": True}  # fmt: skip


@pytest.mark.parametrize("split_down", [1, 2])
def test_down_tile_of_its_own_matches_reference(monkeypatch, split_down):
    poison_buffers(monkeypatch)
    seen = record_launches(monkeypatch)
    seed = int(torch.randint(2**31, ()))
    x, w, tw, ti = random_moe_inputs(TOKENS, EXPERTS, HIDDEN, INTER, TOP_K, seed=seed)
    ti.view(-1)[3] = -1
    # down: 32 columns of H per program, unswapped, K tile 128 > INTER (ragged, EVEN_K off).
    cfg = GATE | {"SPLIT_K_DOWN": split_down,
                  "down": {"BLOCK_N": 32, "BLOCK_K": 128, "SWAP_AB": False}}  # fmt: skip
    shared = torch.randn(TOKENS, HIDDEN).to(torch.bfloat16)
    out = fused_moe_mxfp4(x, w, tw, ti, backend="triton", config=cfg, shared_output=shared)
    ref = fused_moe_mxfp4(x, w, tw, ti, backend="torch", shared_output=shared)
    assert_moe_close(out, ref, shared, TOP_K)
    gate, down = seen["gate_up_swiglu_kernel"], seen["down_kernel"]
    assert (gate["BLOCK_N"], gate["BLOCK_K"], gate["SWAP_AB"]) == (64, 64, True)
    assert (down["BLOCK_N"], down["BLOCK_K"], down["SWAP_AB"]) == (32, 128, False)
    assert down["BLOCK_M"] == gate["BLOCK_M"] == 16 and down["EVEN_K"] is False
    assert down["grid"][1] == HIDDEN // 32 and gate["grid"][1] == -(-INTER // 64)


def test_down_config_validation():
    assert down_config(GATE) == GATE
    got = down_config(GATE | {"down": {"BLOCK_N": 128, "num_stages": 3}})
    assert got == GATE | {"BLOCK_N": 128, "num_stages": 3}
    for bad in ({"BLOCK_M": 32}, {"SPLIT_K": 2}, {"BLOCK_N": True}, {"num_warps": 0}, 3, None):
        with pytest.raises(ValueError, match="down"):
            down_config(GATE | {"down": bad})
    x, w, tw, ti = random_moe_inputs(TOKENS, EXPERTS, HIDDEN, INTER, TOP_K, seed=1)
    with pytest.raises(ValueError, match="down"):
        fused_moe_mxfp4(x, w, tw, ti, backend="triton", config=GATE | {"down": {"BLOCK_M": 8}})
    with pytest.raises(ValueError, match="multiple"):
        fused_moe_mxfp4(x, w, tw, ti, backend="triton", config=GATE | {"down": {"BLOCK_N": 48}})


def test_compile_cases_and_launches_use_the_down_tile():
    from sgl_kernel_rocm.compile_check.cases import moe_pair
    from sgl_kernel_rocm.compile_check.costmodel.launches import moe_launches

    shape = (256, 6144, 256)
    own = GATE | {"down": {"BLOCK_N": 128, "BLOCK_K": 256, "num_stages": 3, "SWAP_AB": False}}
    g0, d0 = moe_pair("sm90", GATE, *shape, "none", "unpack", "k", True)
    g1, d1 = moe_pair("sm90", own, *shape, "none", "unpack", "k", True)
    assert g1.key == g0.key  # gate_up unchanged: one compile serves both configs
    ce = dict(d1.constexprs)
    assert (ce["BLOCK_N"], ce["BLOCK_K"], ce["SWAP_AB"], ce["BLOCK_M"]) == (128, 256, False, 16)
    assert d1.num_stages == 3 and "+swapab" in g1.label and "+swapab" not in d1.label
    assert d1.stream_bytes_per_iter == 128 * 256 // 2 + 128 * 256 // 32
    gl0, dl0 = moe_launches(g0, d0, *shape, 16)
    gl1, dl1 = moe_launches(g1, d1, *shape, 16)
    assert gl1 == gl0
    assert dl1.programs * 2 == dl0.programs and dl1.iters == 1 and dl0.iters == 4


def test_shaping_chooses_the_two_gemms_apart():
    from sgl_kernel_rocm.compile_check import decode_shaping as DS

    a = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4,
         "SWAP_AB": True, "SPLIT_K": 4}  # fmt: skip
    b = {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3,
         "SPLIT_K": 2, "SPLIT_K_DOWN": 2}  # fmt: skip

    class Planted:  # a has the faster gate_up, b the faster down
        def part_cost(self, cfg, shape, tokens, part):
            return {("gate_up", 64): 60.0, ("gate_up", 128): 90.0, ("down", 64): 92.0,
                    ("down", 128): 76.0}[(part, cfg["BLOCK_N"])]  # fmt: skip

    g = DS._best_part(Planted(), [a, b], None, 16, "gate_up")
    d = DS._best_part(Planted(), [a, b], None, 16, "down")
    assert (g, d) == (a, b)
    got = DS.combine(g, d)
    assert got == a | {"SPLIT_K_DOWN": 2,
                       "down": {"BLOCK_N": 128, "num_stages": 3, "SWAP_AB": False}}  # fmt: skip
    assert down_config(got)["BLOCK_N"] == 128 and got["BLOCK_N"] == 64
    assert DS.combine(a, a) == a  # same tile: no "down" entry
