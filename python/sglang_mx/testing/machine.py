"""Stamp for result files: which machine, when."""

from __future__ import annotations

import datetime as dt
import os
import platform


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_stamp() -> dict[str, str | int]:
    stamp: dict[str, str | int] = {
        "cpu": cpu_model(),
        "cores": os.cpu_count() or 0,
        "arch": platform.machine(),
        "date": dt.date.today().isoformat(),
        "gpu": "none",
    }
    try:
        import torch

        if torch.cuda.is_available():
            stamp["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return stamp
