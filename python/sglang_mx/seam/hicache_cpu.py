"""SGLang's hierarchical cache (HiCache, `--enable-hierarchical-cache`) on the CPU platform.

Read against SGLang 0.5.23's `mem_cache/pool_host/`, two things keep HiCache off a CPU box:

- the transfer ops. `pool_host/mla.py`, `dsa.py` and `mha.py` import the `sgl_kernel.kvcacheio`
  ops (`transfer_kv_*`) only under CUDA/HIP (XPU binds them through `pool_host/_kvcacheio.py`);
  on a CPU build the names are never bound, and the first backup to the host pool would be a
  NameError. `bind_transfer_ops` binds the torch versions (`_cpu_shims/kvcacheio_ops.py`) under
  the same names in those modules, only where a name is missing, so a build with the real
  kernels never sees ours.
- the host allocation. The host pools allocate through `pool_host/common.py`
  `ALLOC_MEMORY_FUNCS[device type]`, whose default for "cpu" pins the buffer with
  `cudaHostRegister` ("Torch not compiled with CUDA enabled" on a CPU build). They pass
  `pin_memory=True` whatever the platform's `is_pin_memory_available` says. For "cpu", the
  platform installs an allocator that pins only where `is_pin_memory_available()` is true
  (never on `mx_cpu`): the device pool is host memory already, and there is no DMA engine
  that needs pinned pages.

- the host-memory reserve. Before allocating, a host pool checks that free host RAM minus
  `pool_host/base.py` `HICACHE_HOST_MEMORY_RESERVE_BYTES` (10 GiB, sized for a GPU node with
  hundreds of GiB of host RAM) covers it. On a CPU box the device pool and the weights are
  already in that RAM when the check runs, and on a 24 GiB box shared with other jobs free RAM
  is often under 10 GiB: a 10 MB host pool was refused with "only have -2.53 GB free"
  (2026-12-06). The platform keeps a reserve of 5% of the machine's RAM (at most SGLang's).

The rest of HiCache runs as SGLang wrote it. The cache controller's streams and events are
`torch.cpu`'s, which are no-ops, so each copy runs synchronously on the thread that asks for it.
That is correct, but it does not overlap. `MxCpuPlatform.post_load_model` calls `bind()` in the
scheduler, after the model is loaded and before the tree cache and its host pools are built.
"""

from __future__ import annotations

import importlib
import logging

from sglang_mx.sglang_version import check_version

logger = logging.getLogger(__name__)

# SGLang 0.5.23's host-pool modules that import `sgl_kernel.kvcacheio` ops under CUDA/HIP only.
POOL_MODULES = (
    "sglang.srt.mem_cache.pool_host.mla",
    "sglang.srt.mem_cache.pool_host.dsa",
    "sglang.srt.mem_cache.pool_host.mha",
)
ALLOC_MODULE = "sglang.srt.mem_cache.pool_host.common"
RESERVE_MODULE = "sglang.srt.mem_cache.pool_host.base"
RESERVE_SHARE = 0.05  # of total RAM, kept free of host pools on the CPU platform


def alloc_host_tensor(
    dims, dtype, device, pin_memory, allocator, registration_granularity_bytes=None
):
    """`ALLOC_MEMORY_FUNCS["cpu"]` on the CPU platform: the host allocator's tensor, pinned only
    where the platform says pinned memory exists (SGLang's default would `cudaHostRegister` it)."""
    from sglang.srt.platforms import current_platform

    buffer = allocator.allocate(dims, dtype=dtype, device=device)
    if pin_memory and current_platform.is_pin_memory_available():
        buffer = buffer.pin_memory()
    return buffer


def bind_transfer_ops() -> list[str]:
    """Bind our CPU transfer ops into SGLang's host-pool modules where a name is missing;
    returns the `module.op` names bound."""
    from sglang_mx._cpu_shims.kvcacheio_ops import OPS

    bound = []
    for name in POOL_MODULES:
        module = importlib.import_module(name)
        for op, fn in OPS.items():
            if op not in vars(module):
                setattr(module, op, fn)
                bound.append(f"{name.rpartition('.')[2]}.{op}")
    return bound


def install_allocator() -> None:
    common = importlib.import_module(ALLOC_MODULE)
    funcs = common.ALLOC_MEMORY_FUNCS
    assert hasattr(funcs, "default_factory"), "sglang 0.5.23: ALLOC_MEMORY_FUNCS is a defaultdict"
    funcs["cpu"] = alloc_host_tensor


def cpu_reserve_bytes(total_bytes: int, sglang_reserve: int) -> int:
    return min(sglang_reserve, int(total_bytes * RESERVE_SHARE))


def install_reserve() -> int:
    import psutil

    base = importlib.import_module(RESERVE_MODULE)
    name = "HICACHE_HOST_MEMORY_RESERVE_BYTES"
    assert hasattr(base, name), f"sglang 0.5.23: pool_host/base.py defines {name}"
    reserve = cpu_reserve_bytes(psutil.virtual_memory().total, getattr(base, name))
    setattr(base, name, reserve)
    return reserve


_bound = False


def bind() -> None:
    """Idempotent: the target and the draft model runner each call it."""
    global _bound
    if _bound:
        return
    check_version("sglang_mx.seam.hicache_cpu")
    install_allocator()
    install_reserve()
    bound = bind_transfer_ops()
    _bound = True
    logger.debug("HiCache on the CPU platform: bound %s", ", ".join(bound))
