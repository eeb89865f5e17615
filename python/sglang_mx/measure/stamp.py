"""Provenance stamp for every result file: date, hardware, software versions, config."""

from __future__ import annotations

import datetime as _dt
import os
import platform

from sglang_mx.machine_info import versions


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_cpu() -> str:
    """This host as a result file names it, e.g. "2-core x86_64 CPU (<model name>), no GPU"."""
    return f"{os.cpu_count()}-core {platform.machine()} CPU ({cpu_model()}), no GPU"


def commit() -> str:
    """The git commit this package runs from ("unknown" outside a checkout), "+dirty" when its
    files differ: a figure carries the code it was measured with. The whole sglang_mx package is
    looked at, since bench, plan and this package all make a figure."""
    import subprocess
    from pathlib import Path

    here = Path(__file__).parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here,
                              capture_output=True, text=True, timeout=5)  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=here,
                               capture_output=True, text=True, timeout=5)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def stamp(hardware: str | None = None, config: dict | None = None) -> dict:
    """`hardware` names the accelerator under test (e.g. "8x MI355X"); default: this host's CPU."""
    host = host_cpu()
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hardware or host,
        "client_host": host,
        "python": platform.python_version(),
        "versions": versions(),
        "commit": commit(),
        "config": config or {},
    }
