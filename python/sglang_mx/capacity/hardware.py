"""Hardware table (data/hardware.json) as typed records: HBM, bandwidth, dense rates, $/GPU-hour."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sglang_mx.capacity.tables import load_records

DATA_DIR = Path(__file__).parent / "data"
# Narrow -> wide: a GPU without native units for a dtype runs it at the next wider dtype's rate.
DTYPE_FALLBACK = ("fp4", "fp8", "bf16")


@dataclass(frozen=True)
class Hardware:
    name: str
    arch: str
    hbm_gb: float
    hbm_tb_s: float
    tflops: dict[str, float]
    price_per_gpu_hour: float
    price_source: str
    gpus_per_node: int = 8

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gb * 1e9

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_tb_s * 1e12

    def flops(self, dtype: str) -> float:
        """Dense FLOP/s for `dtype`, falling back to the next wider dtype the GPU has."""
        if dtype not in DTYPE_FALLBACK:
            raise ValueError(f"unknown dtype {dtype!r}; expected one of {DTYPE_FALLBACK}")
        for candidate in DTYPE_FALLBACK[DTYPE_FALLBACK.index(dtype) :]:
            if candidate in self.tflops:
                return self.tflops[candidate] * 1e12
        raise ValueError(f"{self.name} lists no rate for {dtype} or wider")


@cache
def hardware_table(path: str | None = None) -> dict[str, Hardware]:
    return load_records(path or DATA_DIR / "hardware.json", Hardware)


def get_hardware(name: str) -> Hardware:
    table = hardware_table()
    for key, hw in table.items():
        if key.lower() == name.lower():
            return hw
    raise KeyError(f"unknown hardware {name!r}; known: {', '.join(table)}")
