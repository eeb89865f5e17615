"""The FP8 e4m3 -> bf16 bit move of MLA / DSA decode (attention/fp8_bits.py).

The integer-op form (what the interpreter runs) is checked against torch's own conversion for
every code; the PTX and AMDGCN forms (which no CPU runs) are executed here by a small emulator of
the few instructions they use, on every code in every byte position, so a wrong selector or
mask shows without a GPU. The kernel numerics are in test_attention_mla.py.
"""

from __future__ import annotations

import re

import pytest
import torch
from sgl_kernel_rocm.attention import fp8_bits

M32 = 0xFFFFFFFF


@pytest.mark.parametrize(("dtype", "bias"), [(torch.float8_e4m3fn, 120),
                                             (torch.float8_e4m3fnuz, 119)])  # fmt: skip
def test_bit_move_is_exact_for_every_finite_code(dtype, bias):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    want = codes.double()
    got = fp8_bits.e4m3_as_bf16_ref(codes).double() * 2.0**bias
    finite = torch.isfinite(want)
    assert finite.sum() >= 254  # all but the NaN code(s)
    assert torch.equal(got[finite], want[finite])
    # Subnormal codes (exponent field 0) included: they land on bf16 subnormals exactly.
    assert (want[finite].abs() < 2.0 ** (1 - (bias - 120) - 6)).sum() >= 8


def test_scale_factors_fold_the_bias_back():
    for dtype, bias in ((torch.float8_e4m3fn, 120), (torch.float8_e4m3fnuz, 119)):
        c = fp8_bits.latent_constexprs(dtype, "ptx")
        assert c["FP8_ISA"] == "ptx" and c["Q_LIFT"] * c["KV_UNSCALE"] == 2.0**bias
    assert fp8_bits.latent_constexprs(torch.bfloat16, "ptx") == {
        "FP8_ISA": "", "Q_LIFT": 1.0, "KV_UNSCALE": 1.0}  # fmt: skip


def _perm_bytes(data: list[int], sel: int, nibble: bool) -> int:
    """Byte permute: PTX prmt (4-bit selectors into 8 bytes) or AMD v_perm_b32 (byte
    selectors; 0x0C gives 0x00)."""
    out = 0
    for i in range(4):
        s = (sel >> (4 * i)) & 0x7 if nibble else (sel >> (8 * i)) & 0xFF
        if not nibble and s == 0x0C:
            byte = 0
        else:
            byte = data[s]
        out |= byte << (8 * i)
    return out


def _run(asm: str, operands: dict[int, int]) -> dict[int, int]:
    """Execute the bit-move text with registers $N; only the instructions it uses."""
    reg = dict(operands)

    def val(tok: str) -> int:
        tok = tok.strip()
        return reg[int(tok[1:])] if tok.startswith("$") else int(tok, 0)

    for line in asm.replace("{", "").replace("}", "").splitlines():
        line = line.strip().rstrip(";")
        if not line:
            continue
        op, args = line.split(None, 1)
        a = [t.strip() for t in args.split(",")]
        dst = int(a[0][1:])
        if op in ("prmt.b32", "v_perm_b32"):
            # prmt d, a, b, c: bytes 0-3 from a, 4-7 from b; v_perm d, s0, s1, sel: 0-3 from s1
            lo, hi = (val(a[1]), val(a[2])) if op == "prmt.b32" else (val(a[2]), val(a[1]))
            data = [(w >> (8 * i)) & 0xFF for w in (lo, hi) for i in range(4)]
            reg[dst] = _perm_bytes(data, val(a[3]), nibble=op == "prmt.b32")
        elif op in ("shr.b32",):
            reg[dst] = (val(a[1]) & M32) >> val(a[2])
        elif op == "v_lshrrev_b32":  # d, shift, src
            reg[dst] = (val(a[2]) & M32) >> val(a[1])
        elif op in ("and.b32", "v_and_b32"):
            reg[dst] = val(a[1]) & val(a[2]) & M32
        elif op in ("or.b32", "v_or_b32"):
            reg[dst] = (val(a[1]) | val(a[2])) & M32
        elif op == "v_mov_b32":
            reg[dst] = val(a[1]) & M32
        else:
            raise AssertionError(f"the emulator does not know {op!r}: extend it with care")
    return reg


@pytest.mark.parametrize("isa", ["ptx", "amdgcn"])
def test_machine_code_bit_moves_match_the_definition(isa):
    asm = fp8_bits._PTX.value if isa == "ptx" else fp8_bits._AMDGCN.value
    src = max(int(n) for n in re.findall(r"\$(\d+)", asm))  # the input is the last operand
    g = torch.Generator().manual_seed(0)
    words = [c * 0x01010101 for c in range(256)]  # every code in every byte position
    words += torch.randint(0, 2**31, (512,), generator=g).tolist()
    for word in words:
        reg = _run(asm, {src: word})
        codes = torch.tensor([(word >> (8 * i)) & 0xFF for i in range(4)], dtype=torch.uint8)
        want = fp8_bits.e4m3_as_bf16_ref(codes).view(torch.int16).to(torch.int32) & 0xFFFF
        got = [reg[0] & 0xFFFF, reg[0] >> 16, reg[1] & 0xFFFF, reg[1] >> 16]
        assert got == want.tolist(), f"{isa}: word {word:#010x} -> {[hex(v) for v in got]}"
    assert src not in (0, 1) and _run(asm, {src: 0x12345678})[src] == 0x12345678, "input clobbered"
