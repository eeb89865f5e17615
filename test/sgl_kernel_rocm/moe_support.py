"""What the fused-MoE launch tests share: kernel buffers poisoned so that anything read but never
written shows, and a recorder of the tile constexprs and grid each Triton kernel was launched
with (a launch the reference cannot tell apart, e.g. an unswapped tile, still shows there)."""

from __future__ import annotations

import types

import torch

LAUNCH_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SWAP_AB", "EVEN_K")


def poison_buffers(monkeypatch) -> None:
    """triton_moe's outputs, partials and counters start as NaN / 0xFF / -7."""
    from sgl_kernel_rocm.moe import triton_moe

    def poisoned(shape, dtype, device):
        fill = 0xFF if dtype == torch.uint8 else -7 if not dtype.is_floating_point else float("nan")
        return torch.full(shape, fill, dtype=dtype, device=device)

    monkeypatch.setattr(triton_moe, "_empty", poisoned)


def record_launches(monkeypatch) -> dict[str, dict]:
    """{kernel name: {LAUNCH_KEYS..., "grid": grid}} of the gate_up and down launches, filled as
    the wrapper launches them (the kernels still run)."""
    from sgl_kernel_rocm.moe import _kernels, triton_moe

    seen: dict[str, dict] = {}

    class Recorder:
        def __init__(self, name):
            self.name, self.fn = name, getattr(_kernels, name)

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen[self.name] = {k: kwargs.get(k) for k in LAUNCH_KEYS} | {"grid": grid}
                return self.fn[grid](*args, **kwargs)

            return launch

    names = ("gate_up_swiglu_kernel", "down_kernel")
    monkeypatch.setattr(triton_moe, "_kernels",
                        types.SimpleNamespace(**{n: Recorder(n) for n in names}))  # fmt: skip
    return seen


def assert_moe_close(out, ref, shared, top_k: int, note: str = "") -> None:
    """The fused MoE's bf16 output against the torch reference, judged on the routed part.

    The k weighted expert rows are each rounded to bf16 in the per-slot buffer (2**-9 of their
    size, which the routed output bounds up to cancellation: one extra term of slack), and the
    output is rounded once on each side: two fp32 values that close may still round to
    neighbouring bf16 values, one ulp <= 2**-7 of the element apart. So the bound is
    (k + 1) * 2**-8 * max|routed| + 2**-7 * |ref| per element, where routed = ref - shared: the
    N(0, 1) shared output (max ~3.5, against a routed part of ~0.15 rms) must not widen the
    bound on the experts. An unwritten row keeps the shared output the exact-align path
    pre-fills, so it fails here as a row whose routed part is missing."""
    where = f" ({note})" if note else ""
    ref, out = ref.float(), out.float()
    routed = ref - shared.float() if shared is not None else ref
    assert torch.isfinite(out).all(), f"non-finite output: a poisoned buffer was read{where}"
    tol = (top_k + 1) * 2.0**-8 * routed.abs().max().item() + 2.0**-7 * ref.abs()
    excess = (out - ref).abs() - tol
    if (excess > 0).any():
        row, col = divmod(int(excess.argmax()), ref.shape[-1])
        raise AssertionError(
            f"|out - ref| exceeds the bound at {(excess > 0).sum().item()} elements; worst "
            f"[{row}, {col}]: {(out - ref)[row, col].item():.3e} vs tol {tol[row, col].item():.3e}"
            f" (max |routed| {routed.abs().max().item():.3e}){where}"
        )
