"""Make host syncs fail loudly: inside `forbid_host_sync()`, reading a tensor's value on the
host (`.item()`, `int(t)`, `float(t)`, `bool(t)`, `t.tolist()`, `.numpy()`, `.cpu()`, ...)
raises HostSyncError.

On a GPU each of those waits for the device (and a CUDA graph cannot capture it); on this CPU
box they are cheap, so a test wraps a decode call in this guard to prove the call never does
one. Calls made by Triton's interpreter are let through: it stands in for the GPU, which reads
its arguments without any host sync. Tensors listed in `host=` are host metadata (SGLang keeps
e.g. `seq_lens_cpu` on the host), so reading them is allowed too.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator

import torch

# Tensor methods that copy a device value to the host (or need one there).
GUARDED = (
    "item",
    "tolist",
    "numpy",
    "cpu",
    "__int__",
    "__float__",
    "__bool__",
    "__index__",
    "__complex__",
    "__array__",
)


class HostSyncError(RuntimeError):
    """A tensor value was read on the host inside forbid_host_sync()."""


def _from_interpreter(frame) -> bool:
    while frame is not None:
        mod = frame.f_globals.get("__name__", "")
        if mod == "triton" or mod.startswith("triton."):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def forbid_host_sync(host: Iterable[torch.Tensor] = ()) -> Iterator[list[str]]:
    """Patch the GUARDED tensor methods to raise; yields the list of calls let through (by the
    interpreter or on `host` tensors), for a test that wants to see the guard was live."""
    allowed = {id(t) for t in host}
    passed: list[str] = []
    originals = {
        name: getattr(torch.Tensor, name) for name in GUARDED if hasattr(torch.Tensor, name)
    }

    def make(name, orig):
        def guarded(self, *args, **kwargs):
            if id(self) in allowed or _from_interpreter(sys._getframe(1)):
                passed.append(name)
                return orig(self, *args, **kwargs)
            raise HostSyncError(
                f"host sync: Tensor.{name} on a {tuple(self.shape)} {self.dtype} tensor"
            )

        guarded.__name__ = name
        return guarded

    try:
        for name, orig in originals.items():
            setattr(torch.Tensor, name, make(name, orig))
        yield passed
    finally:
        for name, orig in originals.items():
            setattr(torch.Tensor, name, orig)
