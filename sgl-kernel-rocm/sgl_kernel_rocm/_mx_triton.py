"""Triton body of the MXFP4 activation quantizer (W4A4). Callers use `sgl_kernel_rocm.mx`."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def e2m1_codes(v):
    """fp32 values already divided by the block scale -> E2M1 codes 0..15 (sign in bit 3)."""
    a = tl.abs(v)
    code = (
        (a > 0.25).to(tl.int32)
        + (a >= 0.75).to(tl.int32)
        + (a > 1.25).to(tl.int32)
        + (a >= 1.75).to(tl.int32)
        + (a > 2.5).to(tl.int32)
        + (a >= 3.5).to(tl.int32)
        + (a > 5.0).to(tl.int32)
    )
    sign = (v.to(tl.int32, bitcast=True) >> 31) & 1
    return code | (sign << 3)


@triton.jit
def quantize_tile(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    """fp32 [ROWS, COLS] -> (packed uint8 [ROWS, COLS // 2], E8M0 uint8 [ROWS, COLS // 32])."""
    blocks = tl.reshape(x, (ROWS, COLS // 32, 32))
    finite = tl.abs(blocks) < float("inf")  # False for +-Inf and NaN
    clean = tl.where(finite, blocks, 0.0)
    amax = tl.max(tl.abs(clean), axis=2)
    bad = tl.sum((~finite).to(tl.int32), axis=2) > 0
    biased = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF
    shared = tl.minimum(tl.maximum(biased - 129, -127), 127)
    inv_scale = ((127 - shared) << 23).to(tl.float32, bitcast=True)
    codes = e2m1_codes(clean * inv_scale[:, :, None])
    codes = tl.where(bad[:, :, None], 0, codes)
    scales = tl.where(bad, 255, shared + 127).to(tl.uint8)
    pairs = tl.reshape(codes, (ROWS, COLS // 2, 2))
    lo, hi = tl.split(pairs)
    packed = (lo | (hi << 4)).to(tl.uint8)
    return packed, scales


@triton.jit
def _quantize_rows_kernel(
    x_ptr,
    q_ptr,
    s_ptr,
    n_rows,
    n_cols,
    stride_x,
    stride_q,
    stride_s,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    rmask = rows < n_rows
    x = tl.load(
        x_ptr + rows[:, None] * stride_x + cols[None, :],
        mask=rmask[:, None] & (cols[None, :] < n_cols),
        other=0.0,
    ).to(tl.float32)
    packed, scales = quantize_tile(x, BLOCK_R, BLOCK_C)
    store_mx_tile(q_ptr, s_ptr, rows, rmask, pid_c, n_cols, stride_q, stride_s, packed, scales,
                  BLOCK_C)  # fmt: skip


@triton.jit
def store_mx_tile(
    q_ptr, s_ptr, rows, row_ok, pid_c, n_cols, stride_q, stride_s, packed, scales,
    BLOCK_C: tl.constexpr,
):  # fmt: skip
    """Store one `quantize_tile` result: packed [R, BLOCK_C/2] and E8M0 [R, BLOCK_C/32] of rows
    `rows` (masked by `row_ok`), column tile pid_c of rows n_cols long."""
    qcols = pid_c * (BLOCK_C // 2) + tl.arange(0, BLOCK_C // 2)
    scols = pid_c * (BLOCK_C // 32) + tl.arange(0, BLOCK_C // 32)
    tl.store(
        q_ptr + rows[:, None] * stride_q + qcols[None, :],
        packed,
        mask=row_ok[:, None] & (qcols[None, :] < n_cols // 2),
    )
    tl.store(
        s_ptr + rows[:, None] * stride_s + scols[None, :],
        scales,
        mask=row_ok[:, None] & (scols[None, :] < n_cols // 32),
    )


def quantize_rows(
    x: torch.Tensor,
    block_r: int = 16,
    block_c: int = 256,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [R, C] (C % 32 == 0) -> packed uint8 [R, C // 2], scales uint8 [R, C // 32].

    `out` lets a caller (or a test poisoning the buffers) supply both contiguous outputs.
    """
    x = x.contiguous()
    n_rows, n_cols = x.shape
    block_c = min(block_c, triton.next_power_of_2(n_cols))
    block_c = max(block_c, 32)
    if out is None:
        q = torch.empty((n_rows, n_cols // 2), dtype=torch.uint8, device=x.device)
        s = torch.empty((n_rows, n_cols // 32), dtype=torch.uint8, device=x.device)
    else:
        q, s = out
    grid = (triton.cdiv(n_rows, block_r), triton.cdiv(n_cols, block_c))
    _quantize_rows_kernel[grid](
        x,
        q,
        s,
        n_rows,
        n_cols,
        x.stride(0),
        q.stride(0),
        s.stride(0),
        BLOCK_R=block_r,
        BLOCK_C=block_c,
    )
    return q, s
