"""Provenance stamp for every result file: date, hardware, software versions, config."""

from __future__ import annotations

import datetime as _dt
import os
import platform
from importlib import metadata

PACKAGES = ("sglang", "sglang-mx", "torch", "triton", "transformers", "httpx")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


def stamp(hardware: str | None = None, config: dict | None = None) -> dict:
    """`hardware` names the accelerator under test (e.g. "8x MI355X"); default: this host's CPU."""
    host = f"{os.cpu_count()}-core {platform.machine()} CPU ({_cpu_model()}), no GPU"
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hardware or host,
        "client_host": host,
        "python": platform.python_version(),
        "versions": {p: _version(p) for p in PACKAGES},
        "config": config or {},
    }
