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
