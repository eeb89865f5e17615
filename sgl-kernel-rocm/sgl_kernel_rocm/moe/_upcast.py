"""The word-wise MXFP4 -> bf16 upcast of the MoE unpack path, one variant per target, picked at
trace time by the UPCAST constexpr (`moe.config.choose_upcast`):

  "triton": pure Triton bit moves on int32 words (any arch, and the interpreter): result in K
            order (`dequant_words`).
  "ptx":    sm90 / sm100 inline PTX: per 32-bit word, four (shift, shift, mask-or) groups build
            the bf16 pairs (element p, element p + 4), then one `mul.rn.bf16x2` each applies the
            block scale (two with FULL_SCALE_RANGE). The pairs come out in the permuted order
            `permute_k` gives, so the activation tile is permuted the same way (the dot product
            over K does not change); the K-ordered pairs would cost byte permutes instead.
  "gfx950": four `v_cvt_scalef32_pk_bf16_fp4` per word (one per byte: elements 2j, 2j + 1,
            scale applied in the convert), result in K order.

Under the interpreter (F32) "ptx" runs the same bit moves in Triton ops (fp32 container) in the
same permuted order, and "gfx950" runs "triton": inline assembly cannot run there. The bit
layout of one pair (E2M1 code c of element k sits in bits 4k..4k+3 of the word): the 3
magnitude bits go to bf16 bits 8..6 (exponent LSBs + mantissa MSB, so code 1 is the subnormal
2**-127) and the sign to bit 15, i.e. the bf16 holds 2**-126 x its E2M1 value; one multiply by
2**(s-1) then applies the bias and the E8M0 scale together.
"""

from __future__ import annotations

import triton
import triton.language as tl

# Per pair p (elements p and p + 4 of a word): the magnitude shift (left when positive), the
# sign shift (left), and the masks; tests mirror the PTX with these numbers.
PAIR_MAG_SHIFT = (6, 2, -2, -6)
PAIR_SIGN_SHIFT = (12, 8, 4, 0)
MAG_MASK = 0x01C001C0
SIGN_MASK = 0x80008000
BF16X2_2_POW_126 = 0x7E807E80  # the bias multiplier 2**126 in both halves


def _ptx_pair(p: int) -> str:
    mag = PAIR_MAG_SHIFT[p]
    shift = f"shl.b32 m{p}, $4, {mag};" if mag >= 0 else f"shr.u32 m{p}, $4, {-mag};"
    sign = PAIR_SIGN_SHIFT[p]
    sgn = f"shl.b32 s{p}, $4, {sign};" if sign else f"mov.b32 s{p}, $4;"
    return (
        f"{shift} {sgn} and.b32 m{p}, m{p}, {MAG_MASK}; and.b32 s{p}, s{p}, {SIGN_MASK}; "
        f"or.b32 m{p}, m{p}, s{p};"
    )


def _ptx_asm(full_range: bool) -> str:
    """Outputs $0..$3: pairs 0..3 scaled; inputs $4 the word, $5 the bf16x2 multiplier (both
    halves 2**(s-1), or 2**(s-127) with full_range). Every output is written after the last
    read of an input, so no output may alias an input unnoticed."""
    lines = ["{", ".reg .b32 m0, m1, m2, m3, s0, s1, s2, s3, k, b;", "mov.b32 k, $5;"]
    lines += [_ptx_pair(p) for p in range(4)]
    if full_range:
        lines.append(f"mov.b32 b, {BF16X2_2_POW_126};")
        lines += [f"mul.rn.bf16x2 m{p}, m{p}, b;" for p in range(4)]
    lines += [f"mul.rn.bf16x2 ${p}, m{p}, k;" for p in range(4)]
    return "\n".join(lines + ["}"])


_PTX_FAST = tl.constexpr(_ptx_asm(False))
_PTX_FULL = tl.constexpr(_ptx_asm(True))
# Byte j of $4 -> bf16 (element 2j, element 2j + 1) x the fp32 scale $5 (op_sel picks the byte).
# Early-clobber outputs: the first converts would otherwise overwrite inputs later ones read.
_GFX950 = tl.constexpr(
    "v_cvt_scalef32_pk_bf16_fp4 $0, $4, $5\n"
    "v_cvt_scalef32_pk_bf16_fp4 $1, $4, $5 op_sel:[1,0,0]\n"
    "v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[0,1,0]\n"
    "v_cvt_scalef32_pk_bf16_fp4 $3, $4, $5 op_sel:[1,1,0]"
)


@triton.jit
def _nibble_pair_bits(w, PAIR: tl.constexpr):
    """int32 words of 8 E2M1 nibbles -> int32 words holding the bf16 bit patterns (2**-126 x the
    E2M1 value) of elements PAIR (low half) and PAIR + 4 (high half): two shifts and a masked
    OR for two weights; arithmetic right shifts are harmless because the masks drop the top
    bits."""
    if 6 - 4 * PAIR >= 0:
        mag = w << (6 - 4 * PAIR)
    else:
        mag = w >> (4 * PAIR - 6)
    sgn = w << (12 - 4 * PAIR)
    return (mag & 0x01C001C0) | (sgn & -2147450880)  # -2147450880 = 0x80008000


@triton.jit
def _halves(bits, F32: tl.constexpr):
    """int32 word of two bf16 bit patterns -> (low, high) as bf16, or as fp32 with F32 (the
    same values: a bf16 is the top half of an fp32)."""
    if F32:
        lo = (bits << 16).to(tl.float32, bitcast=True)
        hi = (bits & -65536).to(tl.float32, bitcast=True)
    else:
        lo = bits.to(tl.int16).to(tl.bfloat16, bitcast=True)
        hi = (bits >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    return lo, hi


@triton.jit
def _scale_bits(s, FULL_SCALE_RANGE: tl.constexpr, SH: tl.constexpr):
    """E8M0 bytes (int32) -> the bits of the multiplier of a 2**-126-biased weight, exponent
    field at bit SH (7: bf16, 23: fp32): 2**(s-1), or with FULL_SCALE_RANGE 2**(s-127) itself
    (0 = 2**-127, 255 = NaN) for weights already unbiased."""
    if FULL_SCALE_RANGE:
        bits = tl.where(s == 0, 0x40 << (SH - 7), tl.where(s == 255, 0x7FC0 << (SH - 7), s << SH))
    else:
        bits = (s + 126) << SH
    return bits


@triton.jit
def _scale_multiplier(s, FULL_SCALE_RANGE: tl.constexpr, F32: tl.constexpr):
    """`_scale_bits` as a bf16 (fp32 with F32) value."""
    if F32:
        mult = _scale_bits(s, FULL_SCALE_RANGE, 23).to(tl.float32, bitcast=True)
    else:
        mult = _scale_bits(s, FULL_SCALE_RANGE, 7).to(tl.int16).to(tl.bfloat16, bitcast=True)
    return mult


@triton.jit
def _per_word(scales, ROWS: tl.constexpr, COLS: tl.constexpr):
    """[ROWS, COLS // 32] -> [ROWS, COLS // 8]: each block's value repeated for its 4 words."""
    return tl.reshape(tl.broadcast_to(scales[:, :, None], (ROWS, COLS // 32, 4)), (ROWS, COLS // 8))


@triton.jit
def _pairs_tile(p0, p1, p2, p3, ROWS: tl.constexpr, COLS: tl.constexpr, F32: tl.constexpr):
    """Four int32 tensors [ROWS, COLS // 8] of bf16 pairs -> [ROWS, COLS] laid out per word as
    p0.lo, p0.hi, p1.lo, p1.hi, ..., p3.hi."""
    # join(join(p0, p2), join(p1, p3)) is [.., 2 (d), 2 (c)] holding pair 2d + c.
    pairs = tl.join(tl.join(p0, p2), tl.join(p1, p3))
    lo, hi = _halves(pairs, F32)
    return tl.reshape(tl.join(lo, hi), (ROWS, COLS))


@triton.jit
def permute_k(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    """The K order of the "ptx" upcast: within each 8 columns, position 2p + h holds column
    p + 4h (the PTX pairs elements p and p + 4 of a word). Applied to the activation tile so the
    dot product matches; a register renaming where a thread holds 8 consecutive columns."""
    x = tl.reshape(x, (ROWS, COLS // 8, 2, 4))
    return tl.reshape(tl.trans(x, (0, 1, 3, 2)), (ROWS, COLS))


@triton.jit
def dequant_words(
    words,
    scales,
    ROWS: tl.constexpr,
    COLS: tl.constexpr,
    FULL_SCALE_RANGE: tl.constexpr,
    F32: tl.constexpr = False,
):
    """The "triton" variant: packed int32 words [ROWS, COLS // 8] (8 E2M1 nibbles each, the
    checkpoint's byte order read 4 bytes at a time) + E8M0 [ROWS, COLS // 32] -> bf16 (fp32
    with F32) [ROWS, COLS] in K order.

    The one multiply by 2**(s-1) is a normal number only for s <= 128; FULL_SCALE_RANGE takes
    any scale (0 = 2**-127, 255 = NaN) with a second multiply. `moe.layout.prepare_weights`
    checks the range once at load."""
    y0 = _halves(_nibble_pair_bits(words, 0), F32)
    y1 = _halves(_nibble_pair_bits(words, 1), F32)
    y2 = _halves(_nibble_pair_bits(words, 2), F32)
    y3 = _halves(_nibble_pair_bits(words, 3), F32)
    # Element 8j + 4h + 2a + b is half h of pair word (2a + b): join h, then a, then b.
    z0 = tl.join(tl.join(y0[0], y0[1]), tl.join(y2[0], y2[1]))
    z1 = tl.join(tl.join(y1[0], y1[1]), tl.join(y3[0], y3[1]))
    vals = tl.reshape(tl.join(z0, z1), (ROWS, COLS // 32, 32))
    if FULL_SCALE_RANGE:
        # 2**126 (the one-multiply form at s = 127): the product is the E2M1 value, exact.
        bias = _scale_multiplier(tl.full((1, 1, 1), 127, tl.int32), False, F32)
        vals = vals * bias
    mult = _scale_multiplier(scales.to(tl.int32), FULL_SCALE_RANGE, F32)
    return tl.reshape(vals * mult[:, :, None], (ROWS, COLS))


@triton.jit
def _ptx_emulated(words, scales, ROWS: tl.constexpr, COLS: tl.constexpr,
                  FULL_SCALE_RANGE: tl.constexpr):  # fmt: skip
    """What the "ptx" assembly computes, in Triton ops and fp32 (the interpreter's stand-in)."""
    tile = _pairs_tile(
        _nibble_pair_bits(words, 0), _nibble_pair_bits(words, 1), _nibble_pair_bits(words, 2),
        _nibble_pair_bits(words, 3), ROWS, COLS, True,
    )  # fmt: skip
    vals = tl.reshape(tile, (ROWS, COLS // 32, 32))
    if FULL_SCALE_RANGE:
        vals = vals * _scale_multiplier(tl.full((1, 1, 1), 127, tl.int32), False, True)
    mult = _scale_multiplier(scales.to(tl.int32), FULL_SCALE_RANGE, True)
    return tl.reshape(vals * mult[:, :, None], (ROWS, COLS))


@triton.jit
def upcast_words(
    words,
    scales,
    ROWS: tl.constexpr,
    COLS: tl.constexpr,
    FULL_SCALE_RANGE: tl.constexpr,
    UPCAST: tl.constexpr,
    F32: tl.constexpr = False,
):
    """Packed int32 words [ROWS, COLS // 8] + E8M0
    [ROWS, COLS // 32] -> bf16 (fp32 with F32) [ROWS, COLS], by the UPCAST variant (module
    docstring); "ptx" returns the `permute_k` order, the others K order."""
    if UPCAST == "ptx" and F32:
        out = _ptx_emulated(words, scales, ROWS, COLS, FULL_SCALE_RANGE)
    elif UPCAST == "ptx":
        mult = _scale_bits(_per_word(scales, ROWS, COLS).to(tl.int32), FULL_SCALE_RANGE, 7)
        mult = mult | (mult << 16)  # the same bf16 multiplier in both halves
        p0, p1, p2, p3 = tl.inline_asm_elementwise(
            asm=_PTX_FULL if FULL_SCALE_RANGE else _PTX_FAST,
            constraints="=r,=r,=r,=r,r,r",
            args=[words, mult],
            dtype=(tl.int32, tl.int32, tl.int32, tl.int32),
            is_pure=True,
            pack=1,
        )
        out = _pairs_tile(p0, p1, p2, p3, ROWS, COLS, False)
    elif UPCAST == "gfx950" and not F32:
        # fp32 2**(s-127) for every byte (0 = 2**-127 as an fp32 subnormal, 255 = NaN).
        s32 = _scale_bits(_per_word(scales, ROWS, COLS).to(tl.int32), True, 23)
        p0, p1, p2, p3 = tl.inline_asm_elementwise(
            asm=_GFX950,
            constraints="=&v,=&v,=&v,=&v,v,v",
            args=[words, s32.to(tl.float32, bitcast=True)],
            dtype=(tl.int32, tl.int32, tl.int32, tl.int32),
            is_pure=True,
            pack=1,
        )
        out = _pairs_tile(p0, p1, p2, p3, ROWS, COLS, False)
    else:
        out = dequant_words(words, scales, ROWS, COLS, FULL_SCALE_RANGE, F32)
    return out
