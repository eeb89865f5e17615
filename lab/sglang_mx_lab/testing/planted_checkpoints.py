"""Checkpoints with a planted quantization bug, for the verdicts that must refute a model that
no longer computes what it should (bench verify --reference, issue 45).

`swap_nibbles`: a copy of an MXFP4 checkpoint whose packed E2M1 weights hold their two 4-bit
codes in the other order within each byte, the packing bug a wrong (low, high) convention
between a quantizer and a kernel makes. Scales, shapes and every other tensor are untouched, so
the server loads and serves it without complaint: only its numbers are wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

PACKED_SUFFIX = ".weight"


def swap_nibbles(src: str | Path, dst: str | Path) -> int:
    """Write src's checkpoint to dst with every packed uint8 expert weight's nibbles swapped;
    returns how many tensors were changed."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    src, dst = Path(src), Path(dst)
    shutil.copytree(src, dst, symlinks=False)
    path = dst / "model.safetensors"
    tensors, changed = {}, 0
    with safe_open(str(src / "model.safetensors"), framework="pt") as f:
        metadata = f.metadata()
        for name in f.keys():
            t = f.get_tensor(name)
            if t.dtype == torch.uint8 and name.endswith(PACKED_SUFFIX):
                t = ((t >> 4) | (t << 4)).to(torch.uint8)
                changed += 1
            tensors[name] = t
    if not changed:
        raise ValueError(f"{src}: no packed uint8 '*{PACKED_SUFFIX}' tensor to plant a bug in")
    save_file(tensors, str(path), metadata=metadata)
    return changed
