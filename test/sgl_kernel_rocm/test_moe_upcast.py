"""The word-wise FP4 upcast of the MoE unpack path (`moe/_upcast.py`), exhaustively: all 256
byte values at every byte position of a word x 16 E8M0 scale classes (0, the fast limit 128/129,
254, NaN 255) against the torch dequantizer, exact. The "triton" variant and the interpreter's
stand-in of "ptx" run through the Triton interpreter; the "ptx" assembly text itself runs on a
small executor of the PTX instructions it uses. The fused MoE on the "ptx" order (activations
permuted to match) against the reference."""

from __future__ import annotations

import re

import pytest
import torch
from _upcast_kernel import gfx950_order_kernel, upcast_words_kernel
from sgl_kernel_rocm.moe import fused_moe_mxfp4
from sgl_kernel_rocm.moe._upcast import _ptx_asm
from sgl_kernel_rocm.moe.config import choose_upcast
from sgl_kernel_rocm.moe.layout import FAST_SCALE_MAX
from sgl_kernel_rocm.mx import dequantize_mxfp4
from test_moe import _make_case

# Every scale class: 2**-127 (0), small, around 1, the fast limit and just past it, large,
# 2**127 (254) and NaN (255); 16 of them, so the test tile (4 rows each) is a power of two.
SCALES = [0, 1, 2, 60, 100, 125, 126, 127, 128, 129, 130, 200, 250, 253, 254, 255]


def _every_byte() -> tuple[torch.Tensor, torch.Tensor]:
    """(packed [4 * len(SCALES), 256], scales [4 * len(SCALES), 16]): each row holds all 256 byte
    values (every pair of E2M1 codes), rotated by 0..3 so each value sits at every byte position
    of a 32-bit word once; all 16 blocks of a row share one scale of SCALES."""
    every = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    q = torch.stack([every.roll(j) for _ in SCALES for j in range(4)])
    s = torch.tensor(SCALES, dtype=torch.uint8).repeat_interleave(4)[:, None].expand(-1, 16)
    return q, s.contiguous()


def _unpermute(x: torch.Tensor) -> torch.Tensor:
    """`_upcast.permute_k` order -> K order: within 8 columns, position 2p + h holds p + 4h."""
    rows, cols = x.shape
    return x.view(rows, cols // 8, 4, 2).transpose(-1, -2).reshape(rows, cols)


def _upcast(q: torch.Tensor, s: torch.Tensor, full: bool, upcast: str) -> torch.Tensor:
    rows, cols = q.shape[0], q.shape[1] * 2
    out = torch.empty(rows, cols)
    upcast_words_kernel[(1,)](q, s, out, rows, cols, full, upcast)
    return _unpermute(out) if upcast == "ptx" else out


def _check_exhaustive(upcast_fn) -> None:
    q, s = _every_byte()
    ref = dequantize_mxfp4(q, s, dtype=torch.float32)
    got = upcast_fn(q, s, True)
    torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True)
    # E8M0 0xFF is NaN: every element of such a block, zero codes included.
    nan_rows = s[:, 0] == 255
    assert nan_rows.any() and torch.isnan(got[nan_rows]).all()
    assert not torch.isnan(got[~nan_rows]).any()
    fast = s[:, 0] <= FAST_SCALE_MAX
    got_fast = upcast_fn(q, s, False)
    torch.testing.assert_close(got_fast[fast], ref[fast], rtol=0, atol=0)
    # Past the limit the one-multiply form is wrong: that is why prepare_weights checks.
    assert not torch.equal(got_fast[~fast].nan_to_num(), ref[~fast].nan_to_num())


@pytest.mark.parametrize("upcast", ["triton", "ptx"])
def test_upcast_matches_dequantizer_every_byte_and_scale(upcast):
    _check_exhaustive(lambda q, s, full: _upcast(q, s, full, upcast))


def _bf16x2(bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lo = (bits & 0xFFFF).to(torch.int32).to(torch.int16).view(torch.bfloat16)
    hi = ((bits >> 16) & 0xFFFF).to(torch.int32).to(torch.int16).view(torch.bfloat16)
    return lo, hi


def _run_ptx(asm: str, regs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Execute the straight-line PTX the "ptx" upcast emits (mov, shl, shr.u32, and, or,
    mul.rn.bf16x2 on .b32 registers) on int64 tensors holding uint32 values."""

    def val(tok: str) -> torch.Tensor:
        return regs[tok] if tok in regs else torch.tensor(int(tok, 0), dtype=torch.int64)

    for stmt in asm.replace("\n", " ").split(";"):
        stmt = stmt.strip(" {}")
        if not stmt or stmt.startswith(".reg"):
            continue
        op, args = stmt.split(None, 1)
        d, *src = [a.strip() for a in args.split(",")]
        a = val(src[0])
        if op == "mov.b32":
            r = a
        elif op == "shl.b32":
            r = a << int(src[1])
        elif op == "shr.u32":
            r = a >> int(src[1])  # values are non-negative: a logical shift
        elif op == "and.b32":
            r = a & val(src[1])
        elif op == "or.b32":
            r = a | val(src[1])
        elif op == "mul.rn.bf16x2":
            # Products of two bf16 are exact in fp32 here; the cast rounds to nearest even.
            (al, ah), (bl, bh) = _bf16x2(a), _bf16x2(val(src[1]))
            lo = (al.float() * bl.float()).to(torch.bfloat16).view(torch.int16).to(torch.int64)
            hi = (ah.float() * bh.float()).to(torch.bfloat16).view(torch.int16).to(torch.int64)
            r = (lo & 0xFFFF) | ((hi & 0xFFFF) << 16)
        else:
            raise AssertionError(f"PTX op {op!r} not modelled by the test")
        regs[d] = r & 0xFFFFFFFF
    return regs


def _ptx_upcast(q: torch.Tensor, s: torch.Tensor, full: bool) -> torch.Tensor:
    """The "ptx" assembly run on every word: outputs $p = (element p, element p + 4)."""
    rows, cols = q.shape[0], q.shape[1] * 2
    words = q.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    sb = s.to(torch.int64).repeat_interleave(4, dim=1)  # one scale per word
    if full:
        bits = torch.where(sb == 0, 0x40, torch.where(sb == 255, 0x7FC0, sb << 7))
    else:
        bits = (sb + 126) << 7
    regs = _run_ptx(_ptx_asm(full), {"$4": words, "$5": bits | (bits << 16)})
    out = torch.empty(rows, cols // 8, 8)
    for p in range(4):
        lo, hi = _bf16x2(regs[f"${p}"])
        out[:, :, p], out[:, :, p + 4] = lo.float(), hi.float()
    return out.reshape(rows, cols)


def test_ptx_assembly_matches_dequantizer_every_byte_and_scale():
    asm = _ptx_asm(False)
    assert len(re.findall(r"mul\.rn\.bf16x2", asm)) == 4  # one multiply per two weights
    _check_exhaustive(_ptx_upcast)


def test_gfx950_pair_order_every_byte_and_scale():
    # The hardware convert itself runs only on a gfx950; this checks how its four outputs per
    # word are put in K order, with a stand-in of the convert (full-range scales).
    q, s = _every_byte()
    out = torch.empty(q.shape[0], q.shape[1] * 2)
    gfx950_order_kernel[(1,)](q, s, out, q.shape[0], q.shape[1] * 2)
    ref = dequantize_mxfp4(q, s, dtype=torch.float32)
    torch.testing.assert_close(out, ref, rtol=0, atol=0, equal_nan=True)


def test_choose_upcast():
    assert choose_upcast("sm90") == choose_upcast("sm100") == "ptx"
    assert choose_upcast("gfx950") == "gfx950"
    assert choose_upcast("gfx942") == choose_upcast("cpu") == "triton"
    assert choose_upcast("sm90", {"BLOCK_M": 16, "upcast": "triton"}) == "triton"
    with pytest.raises(ValueError, match="upcast"):
        choose_upcast("sm90", {"upcast": "sse"})


@pytest.mark.parametrize("act_quant", ["none", "mxfp4"])
def test_fused_moe_on_the_ptx_order_matches_reference(act_quant):
    # The "ptx" upcast's weights come out in permuted K order; the activation tile is permuted
    # to match. Interpreter: the pure-Triton stand-in with the same order.
    t, e, h, i, k = 9, 4, 128, 64, 2
    case = _make_case(t, e, h, i, k, torch.float32, masked=2, seed=4)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "upcast": "ptx"}
    out = fused_moe_mxfp4(*case, act_quant=act_quant, backend="triton", path="unpack", config=cfg)
    ref = fused_moe_mxfp4(*case, act_quant=act_quant, backend="torch")
    # fp32 everywhere: only summation order differs (test_moe.test_triton_matches_reference_fp32).
    scale = ref.abs().max().item()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5 * scale)
