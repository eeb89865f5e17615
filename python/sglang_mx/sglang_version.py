"""The SGLang we plug into: the version every private access of ours was written against, its
check, and the one door to SGLang's HookRegistry (checked first). A leaf: it imports nothing of
ours, so any concern can use it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SGLANG_VERSION = "0.5.23"


def check_version(what: str = "sglang_mx") -> None:
    """A different SGLang must fail loudly here, not misbehave later."""
    import sglang

    if sglang.__version__ != SGLANG_VERSION:
        raise RuntimeError(
            f"{what} was written for sglang {SGLANG_VERSION}, found {sglang.__version__}; "
            "review the SGLang privates it names (module docstrings) before using this version"
        )


def hook(target: str, fn: Callable[..., Any], kind: str) -> None:
    """`HookRegistry.register(target, fn, HookType[kind])` (kind: BEFORE, AFTER, AROUND) after
    the version check: every target we hook is a private of this SGLang version."""
    check_version()
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(target, fn, HookType[kind])
