"""Which implementation a MoE entry point runs: one rule for `fused_moe_mxfp4` and
`fused_moe_bf16` (a leaf, so neither imports the package that exports both)."""

from __future__ import annotations

BACKENDS = ("auto", "torch", "triton")


def resolve_backend(backend: str, device_type: str) -> str:
    """The implementation `fused_moe_mxfp4` runs: "auto" is the torch reference for CPU tensors
    and the Triton kernels for GPU tensors; "torch" and "triton" are taken as given."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "torch" if device_type == "cpu" else "triton"
    return backend
