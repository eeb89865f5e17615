"""FP8 e4m3 KV tiles to bf16 by moving bits, converted once per tile (MLA / DSA latent cache).

A float convert (sm90: F2FP to f16, then two F2F; gfx9: v_cvt chains) costs several
instructions per element, and Triton's layout passes hoist it past the layout conversions to
each dot operand, so a tile read by two dots was converted twice (docs/kernels-attention.md).
Here the sign and the 7 exponent+mantissa bits of a code move into a bf16 code: 3 integer ops
an element, exact for every finite code (subnormals included). The bf16 holds value *
2^-bias (120 for OCP e4m3fn, 119 for the FNUZ e4m3 of gfx942); the kernel folds 2^bias into its
scales, and lifts q and P by 2^64 (exact) so MMA products of those tiny values stay normal
floats, never flushed denormals. NaN codes become finite: a KV cache never holds NaN.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LIFT_LOG2 = 64  # q and P are multiplied by 2^64 before their MMAs with the bit-moved tile
_BIAS = {torch.float8_e4m3fn: 120, torch.float8_e4m3fnuz: 119}


@triton.jit
def e4m3_as_bf16(x):
    """e4m3 tile (fp8 or its bytes) -> bf16 tile worth value * 2^-bias, by integer ops (the
    interpreter's path, and the definition the machine-code versions below implement)."""
    u = x.to(tl.uint8, bitcast=True).to(tl.uint16)
    return (((u & 0x80) << 8) | ((u & 0x7F) << 4)).to(tl.bfloat16, bitcast=True)


# Four codes (one 32-bit word, the last operand) to four bf16 (words $0: codes 0,1 and $1:
# codes 2,3; $2 is scratch). A byte permute puts each code in the top byte of its 16-bit half,
# then per half (h & 0x8000) | (h & 0x7F00) >> 4. AMD: gfx9 VOP3 takes no literal, so the
# selectors go through a register. Not pure on purpose: Triton's layout passes duplicate a pure
# elementwise op into each dot operand's layout (a tile read by two dots was converted twice).
_PTX = tl.constexpr("""{
prmt.b32 $0, $3, 0, 0x1404;
prmt.b32 $1, $3, 0, 0x3424;
shr.b32 $2, $0, 4;
and.b32 $2, $2, 0x07F007F0;
and.b32 $0, $0, 0x80008000;
or.b32 $0, $0, $2;
shr.b32 $2, $1, 4;
and.b32 $2, $2, 0x07F007F0;
and.b32 $1, $1, 0x80008000;
or.b32 $1, $1, $2;
}""")
_AMDGCN = tl.constexpr("""
v_mov_b32 $2, 0x010c000c
v_perm_b32 $0, $3, $3, $2
v_mov_b32 $2, 0x030c020c
v_perm_b32 $1, $3, $3, $2
v_lshrrev_b32 $2, 4, $0
v_and_b32 $2, 0x07f007f0, $2
v_and_b32 $0, 0x80008000, $0
v_or_b32 $0, $0, $2
v_lshrrev_b32 $2, 4, $1
v_and_b32 $2, 0x07f007f0, $2
v_and_b32 $1, 0x80008000, $1
v_or_b32 $1, $1, $2
""")


@triton.jit
def e4m3_as_bf16_ptx(x):
    """e4m3_as_bf16 in PTX: one opaque op per 4 codes (packed 4 to a register by Triton)."""
    out, _ = tl.inline_asm_elementwise(
        _PTX, "=r,=r,=&r,r", [x.to(tl.uint8, bitcast=True)], dtype=(tl.bfloat16, tl.int8),
        is_pure=False, pack=4,
    )  # fmt: skip
    return out


@triton.jit
def e4m3_words_as_bf16_amdgcn(words):
    """[N, K/4] 32-bit words of 4 e4m3 codes each (first code in the low byte) -> [N, K] bf16
    worth value * 2^-bias, in AMDGCN: AMDGPU allocates no register for the packed 8- or 16-bit
    vectors the PTX form passes, so one opaque op maps a word to two words of bf16 pairs, and
    the pairs are unpacked (register halves) and interleaved."""
    w01, w23, _ = tl.inline_asm_elementwise(
        _AMDGCN, "=&v,=&v,=&v,v", [words.to(tl.int32, bitcast=True)],
        dtype=(tl.int32, tl.int32, tl.int32), is_pure=False, pack=1,
    )  # fmt: skip
    c0 = w01.to(tl.int16).to(tl.bfloat16, bitcast=True)
    c1 = (w01 >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    c2 = w23.to(tl.int16).to(tl.bfloat16, bitcast=True)
    c3 = (w23 >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    quad = tl.join(tl.join(c0, c1), tl.join(c2, c3))  # [N, K/4, 2 (pair), 2 (in pair)]
    return tl.reshape(quad, (words.shape[0], 4 * words.shape[1]))


def latent_constexprs(dtype: torch.dtype, isa: str) -> dict[str, object]:
    """The MLA kernel's FP8_ISA / Q_LIFT / KV_UNSCALE for a cache dtype: for an FP8 cache the
    bit move (`isa`: "ptx", "amdgcn", or "ops" for integer ops, the interpreter's) and its
    exact powers of two; "" and identity factors for bf16/fp16/fp32."""
    bias = _BIAS.get(dtype)
    if bias is None:
        return {"FP8_ISA": "", "Q_LIFT": 1.0, "KV_UNSCALE": 1.0}
    return {"FP8_ISA": isa, "Q_LIFT": 2.0**LIFT_LOG2, "KV_UNSCALE": 2.0 ** (bias - LIFT_LOG2)}


def host_isa() -> str:
    """Which bit move this process launches: integer ops in the interpreter, else the ISA of
    the GPU torch drives."""
    from sgl_kernel_rocm.attention._common import interpreting

    if interpreting() or not torch.cuda.is_available():
        return "ops"
    return "amdgcn" if torch.version.hip else "ptx"


def e4m3_as_bf16_ref(x: torch.Tensor) -> torch.Tensor:
    """Torch twin of e4m3_as_bf16 (for tests): the same bit move on the bytes."""
    u = x.view(torch.uint8).to(torch.int32)
    bits = ((u & 0x80) << 8) | ((u & 0x7F) << 4)
    return bits.to(torch.int16).view(torch.bfloat16)
