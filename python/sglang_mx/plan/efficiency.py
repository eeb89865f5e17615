"""Kernel-efficiency profiles (data/efficiency.json): achieved / datasheet fraction for each
step-cost term and the per-step overhead, each field labelled with its source."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from sglang_mx.capacity.tables import load_records, lookup

DATA = Path(__file__).parent / "data" / "efficiency.json"
H200_DATASHEET_GB_S = 4800.0


@dataclass(frozen=True)
class Efficiency:
    name: str
    moe_mem: float
    attn_mem: float
    dense_mem: float
    compute: float
    sched_base_us: float
    sched_per_req_us: float
    launch_graph_us: float
    launch_eager_us_per_layer: float
    kernel_floor_us_per_layer: float = 0.0  # GPU time a layer takes however small the batch
    sources: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for key in ("moe_mem", "attn_mem", "dense_mem", "compute"):
            value = getattr(self, key)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"efficiency {self.name}.{key} = {value} must be in (0, 1]")


@cache
def profiles() -> dict[str, Efficiency]:
    return load_records(DATA, Efficiency)


def get_profile(name: str) -> Efficiency:
    return lookup(profiles(), name, "efficiency profile")


def measured_fractions(gpu_check_json: str | Path) -> dict[str, float]:
    """The measured fields of 'sglang-mx-sm90-measured', re-derived from a gpu-check result."""
    d = json.loads(Path(gpu_check_json).read_text())
    scale = d["copy"]["median_gbps"] / H200_DATASHEET_GB_S
    rows = d["rows"]

    def median(kind: str, pred=lambda r: True) -> float:
        values = [r["frac_copy"] for r in rows if r.get("kind") == kind and pred(r)]
        return statistics.median(values) * scale

    def one(kind: str, pred) -> float:
        return next(r["us"] for r in rows if r.get("kind") == kind and pred(r))

    floor = one("moe", lambda r: r["layout"] == "TP8" and r["tokens"] == 1) + one(
        "dsa", lambda r: r["mode"] == "TP8" and r["batch"] == 1 and r["ctx"] == 20480
    )
    return {
        "moe_mem": median("moe", lambda r: r["tokens"] <= 64),
        "attn_mem": median("dsa"),
        "dense_mem": median("moe_bf16"),
        "kernel_floor_us_per_layer": floor,
    }
