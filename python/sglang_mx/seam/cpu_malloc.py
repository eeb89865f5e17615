"""The allocator a CPU server runs on.

A decode step on the CPU path allocates and frees large temporaries whose size grows with the
context (the dequantized latent rows and index scores of every cached key). glibc's malloc raises
its mmap threshold each time such a block is freed, so later ones come from the heap, where they
fragment: the scheduler's resident memory climbs with every step instead of settling. Measured
2026-12-05 on the 2-core box (one 2k-token request, 1,500 greedy tokens, the default model, FP8
KV): glibc as is 1.6 -> 5.1 GB; glibc with a fixed 128 KiB mmap threshold settles at 1.9 GB;
jemalloc settles at 2.0 GB. At 20k tokens the PD decode side grew ~16 MB a step until the kernel
killed it at token 909 of 1,000 (24 GB box). docs/results/cpu-malloc-decode-rss.json.

`sglang-mx serve` on a CPU box therefore preloads jemalloc (Debian's libjemalloc2, which
`make setup` installs) into the server's processes, or, without it, fixes glibc's mmap threshold.
SGLANG_MX_MALLOC=glibc leaves glibc as it is; an LD_PRELOAD that already names an allocator is
kept."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

JEMALLOC_PATHS = (
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    "/usr/lib64/libjemalloc.so.2",
    "/usr/lib/libjemalloc.so.2",
)
MMAP_THRESHOLD = 128 * 1024  # bytes; set explicitly, glibc stops raising it (mallopt(3))
ALLOCATOR_NAMES = ("jemalloc", "tcmalloc", "mimalloc")


def malloc_env(
    choice: str, environ: Mapping[str, str], candidates: Iterable[str] = JEMALLOC_PATHS
) -> tuple[dict[str, str], str]:
    """(variables to add to a CPU server's environment, a one-line account of the allocator).
    `choice` is ENV.malloc; SGLANG_MX_MALLOC=jemalloc where no libjemalloc.so.2 is found is a
    ValueError naming the package."""
    if choice == "glibc":
        return {}, "glibc malloc as it is (SGLANG_MX_MALLOC=glibc)"
    preload = environ.get("LD_PRELOAD", "")
    if any(name in preload for name in ALLOCATOR_NAMES):
        return {}, f"the allocator LD_PRELOAD already names ({preload})"
    found = next((p for p in candidates if os.path.exists(p)), None)
    if found:
        return {"LD_PRELOAD": f"{found} {preload}".strip()}, f"jemalloc ({found})"
    if choice == "jemalloc":
        raise ValueError(
            "SGLANG_MX_MALLOC=jemalloc but no libjemalloc.so.2 is installed "
            "(Debian/Ubuntu: apt-get install libjemalloc2; make setup does it as root)"
        )
    if "MALLOC_MMAP_THRESHOLD_" in environ:
        return {}, f"glibc, mmap threshold {environ['MALLOC_MMAP_THRESHOLD_']} (as given)"
    account = f"glibc, mmap threshold fixed at {MMAP_THRESHOLD} bytes (no libjemalloc.so.2)"
    return {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)}, account
