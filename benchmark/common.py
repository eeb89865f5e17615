"""What the provider and guard benchmarks share: where results go, the run's metadata (date,
hardware, load, versions), their command line, and for the provider benchmarks the bundled-model
servers they start and the table + JSON + PNG ending of a run."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from sglang_mx.measure.stamp import host_cpu as hardware

RESULTS = Path(__file__).parent / "results"


def load_avg() -> float:
    """1-minute load average when recorded: this box is shared, so the numbers carry it."""
    import os

    return os.getloadavg()[0]


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {"python": platform.python_version()}
    for pkg in ("sglang", "smg", "fastapi", "uvicorn", "httpx", "torch"):
        try:
            out[pkg] = version(pkg)
        except Exception:  # noqa: BLE001 - a missing package is recorded, not fatal
            out[pkg] = "missing"
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def parser(doc: str, out: str, **ints: int) -> argparse.ArgumentParser:
    """A benchmark's command line: its integer knobs with their defaults (`per_group=6` is
    `--per-group 6`) and --out, the result JSON (default: `out` under benchmark/results/)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in ints.items():
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    ap.add_argument("--out", type=Path, default=RESULTS / out)
    return ap


def bundled_servers(stack: ExitStack, n: int) -> list[str]:
    """`n` SGLang servers of the bundled MXFP4 model with the cache report on, started in
    parallel; they stop when `stack` closes. Returns their URLs."""
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.server import launch_server

    cms = [launch_server(bundled_model_path("mxfp4"), extra_args=["--enable-cache-report"])
           for _ in range(n)]  # fmt: skip
    with ThreadPoolExecutor(n) as pool:
        urls = list(pool.map(lambda cm: cm.__enter__(), cms))
    for cm in cms:
        stack.push(cm.__exit__)
    return urls


def served_model(url: str) -> str:
    """The id of the model the SGLang server at `url` serves."""
    return httpx.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]


def run_meta(model: str, args: argparse.Namespace) -> dict[str, Any]:
    """When, where and with what a provider benchmark ran, and its flags."""
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hardware(),
        "load_avg_1m": load_avg(),
        "versions": versions(),
        "model": model,
        "config": vars(args) | {"out": str(args.out)},
    }


def finish(
    result: dict[str, Any],
    out: Path,
    table: Callable[[dict[str, Any]], None],
    plot: Callable[[dict[str, Any], Path], None],
) -> int:
    """A provider benchmark's ending: the hardware and date, its table, then the result JSON at
    `out` and its plot beside it (.png). Returns the exit status."""
    print(f"{result['meta']['hardware']}  {result['meta']['date']}")
    table(result)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    plot(result, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0
