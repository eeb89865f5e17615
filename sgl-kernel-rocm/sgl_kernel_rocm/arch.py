"""Which GPU architecture is this? Arch ids (gfx950, gfx942, sm90, sm100), never product names."""

from __future__ import annotations

import functools

import torch

KNOWN_ARCHS = ("gfx950", "gfx942", "sm90", "sm100")


@functools.cache
def current_arch(device_index: int = 0) -> str:
    """Arch id of the visible GPU, or "cpu" when there is none.

    ROCm reports e.g. "gfx950:sramecc+:xnack-"; CUDA reports a (major, minor) capability.
    """
    if not torch.cuda.is_available():
        return "cpu"
    props = torch.cuda.get_device_properties(device_index)
    gcn = getattr(props, "gcnArchName", "") or ""
    if torch.version.hip and gcn:
        return gcn.split(":")[0]
    major, minor = torch.cuda.get_device_capability(device_index)
    return f"sm{major}{minor}" if minor else f"sm{major}0"


def has_native_dot_scaled(arch: str) -> bool:
    """Block-scaled MX matrix units: CDNA4 (gfx950) and Blackwell (sm100). Hopper emulates."""
    return arch in ("gfx950", "sm100")
