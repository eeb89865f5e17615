"""Make a CPU-only process ready for SGLang 0.5.23's CPU engine, before its model code imports.

SGLang decides "CPU engine or not" from SGLANG_USE_CPU_ENGINE (`sglang.srt.utils.is_cpu`), read
when each layer module is imported. Without it the rotary embedding falls back to vllm ops; with
it some modules import the CUDA-only `sgl_kernel` package. We set the variable (children inherit
it) and, when neither the real `sgl_kernel` nor the venv-wide stand-in (`venv_shims`) can be
found, put our stand-in on the path.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from sglang_mx.sglang_version import check_version

SHIM_ROOT = Path(__file__).parents[1] / "_cpu_shims"
# package name -> folder holding our stand-in for it
SHIMS = {"sgl_kernel": SHIM_ROOT / "sgl_kernel_shim", "torchvision": SHIM_ROOT / "torchvision_shim"}


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


def prepare_process() -> None:
    os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    # Eager mode: inductor compiles the router on first request (11-19 s stall on 2 cores) for
    # no steady-state gain at this size.
    os.environ.setdefault("TORCH_COMPILE_DISABLE", "1")
    # Our Triton kernels (--attention-backend mx_triton, SGLANG_MX_MOE_BACKEND=triton) can only
    # run on a CPU through the interpreter; it is read when kernel modules are imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")
    refresh_is_cpu_cache()
    for name in SHIMS:
        add_standin(name)


def add_standin(name: str) -> None:
    """Put our stand-in for package `name` on the path of this process and its children, unless
    the real package or a stand-in can already be found."""
    shim = str(SHIMS[name])
    if shim in sys.path or importlib.util.find_spec(name) is not None:
        # The real package, or the stand-in made venv-wide by sglang_mx.seam.venv_shims.
        return
    sys.path.insert(0, shim)
    # Spawned children get sys.path from multiprocessing; subprocesses from PYTHONPATH.
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if shim not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([shim, *parts])
