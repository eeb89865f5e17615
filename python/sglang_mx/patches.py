"""Every patch of an SGLang private, in one place. Each says why, and asserts the version it was
written against: a different SGLang must fail loudly here, not misbehave later."""

from __future__ import annotations

SGLANG_VERSION = "0.5.23"


def check_version() -> None:
    import sglang

    if sglang.__version__ != SGLANG_VERSION:
        raise RuntimeError(
            f"sglang_mx patches were written for sglang {SGLANG_VERSION}, found "
            f"{sglang.__version__}; review sglang_mx/patches.py before using this version"
        )


def refresh_is_cpu_cache() -> None:
    """`sglang.srt.utils.common.is_cpu` is lru-cached and `python -m sglang.launch_server`
    imports modules that call it before `load_plugins()` runs, so it can have cached False
    before we set SGLANG_USE_CPU_ENGINE=1. Clearing the cache makes later callers (device
    selection, model layers) see the CPU engine."""
    check_version()
    from sglang.srt.utils import common

    fn = common.is_cpu
    assert hasattr(fn, "cache_clear"), "sglang 0.5.23 caches is_cpu with lru_cache"
    fn.cache_clear()


def apply() -> None:
    check_version()
