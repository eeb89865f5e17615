"""Pin a running SGLang server (every process and thread of it) to given cores.

SGLANG_CPU_OMP_THREADS_BIND does not bind anything on a CPU without AMX (or arm64): SGLang 0.5.23
reads it for `local_omp_cpuid`, then `distributed/bootstrap._init_cpu_threads_env` logs
"init_cpu_threads_env ... is disabled, only intel amx backend and arm64 are supported" and
returns, so the scheduler keeps the whole box (Cpus_allowed_list 0-1 here) and torch's default
thread count. Two servers meant to own a core each then share both. This pins them for real:
start the server with OMP_NUM_THREADS=1 (ONE_THREAD_ENV: one intra-op thread per process), then
`pin_server` sets the affinity of each thread of the process listening on its port and of all
its children (scheduler, detokenizer)."""

from __future__ import annotations

import os
from urllib.parse import urlparse

import psutil

ONE_THREAD_ENV = {"OMP_NUM_THREADS": "1"}


def server_processes(base_url: str) -> list[psutil.Process]:
    """The launch_server process started with `--port <base_url's port>` and its descendants."""
    port = str(urlparse(base_url).port)
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "sglang.launch_server" in cmd and port in cmd and cmd[cmd.index(port) - 1] == "--port":
            return [proc, *proc.children(recursive=True)]
    raise LookupError(f"no sglang.launch_server process with --port {port}")


def pin_server(base_url: str, cores: set[int]) -> int:
    """Affinity of every thread of the server's processes = `cores`; returns threads pinned."""
    pinned = 0
    for proc in server_processes(base_url):
        try:
            threads = proc.threads()
        except psutil.NoSuchProcess:
            continue
        for t in threads:
            try:
                os.sched_setaffinity(t.id, cores)
                pinned += 1
            except (ProcessLookupError, PermissionError):
                pass
    return pinned


def allowed_cores(base_url: str) -> set[int]:
    """The cores the server's processes may run on (their union)."""
    out: set[int] = set()
    for proc in server_processes(base_url):
        out |= set(proc.cpu_affinity())
    return out
