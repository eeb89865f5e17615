"""Tuned launch configs as data: configs/<op>/<arch>.json, with token-count buckets.

File layout (one per op and arch id):

    {
      "_meta": {"source": "measured" | "static", "how": "...", "date": "...", "hardware": "..."},
      "<shape key>": {"M_LEQ_16": {...}, "M_LEQ_64": {...}, ..., "any": {...}},
      "DEFAULT": {"M_LEQ_16": {...}, "any": {...}}     (or one per variant, e.g. DEFAULT_a4)
    }

"static" tables are chosen from compiler data (scripts/tune_moe.py --static, no GPU), "measured"
ones from timings on the GPU itself.

`get_config` returns (config, is_tuned). is_tuned is True only when the file exists, says
"measured" and has the exact shape key; otherwise the caller gets the file's DEFAULT or, with
no file at all, the op's heuristic, which must launch on any GPU.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).parent / "configs"
_BUCKET = re.compile(r"^M_LEQ_(\d+)$")


@functools.cache
def load_table(op: str, arch: str) -> dict[str, Any] | None:
    path = CONFIG_DIR / op / f"{arch}.json"
    if not path.exists():
        return None
    with path.open() as f:
        table = json.load(f)
    if not isinstance(table, dict):
        raise ValueError(
            f"{path}: expected a JSON object keyed by shape, got {type(table).__name__}"
        )
    return table


def pick_bucket(buckets: dict[str, Any], m: int) -> dict[str, Any] | None:
    """Smallest M_LEQ_n bucket with m <= n, else "any"."""
    best: tuple[int, dict[str, Any]] | None = None
    for key, cfg in buckets.items():
        match = _BUCKET.match(key)
        if match and m <= int(match.group(1)) and (best is None or int(match.group(1)) < best[0]):
            best = (int(match.group(1)), cfg)
    if best is not None:
        return dict(best[1])
    return dict(buckets["any"]) if "any" in buckets else None


def get_config(
    op: str,
    arch: str,
    m: int,
    shape_key: str,
    heuristic: Callable[[int], dict[str, Any]],
    default_key: str = "DEFAULT",
) -> tuple[dict[str, Any], bool]:
    """Resolve a launch config for `op` on `arch` at `m` tokens for one weight shape; a shape
    the table does not name gets its `default_key` entry (an op may keep one per variant)."""
    return _get_config_cached(op, arch, m, shape_key, heuristic, default_key)


@functools.lru_cache(maxsize=4096)
def _get_config_cached(op, arch, m, shape_key, heuristic, default_key):
    table = load_table(op, arch)
    if table is not None:
        measured = table.get("_meta", {}).get("source") == "measured"
        if shape_key in table:
            cfg = pick_bucket(table[shape_key], m)
            if cfg is not None:
                return cfg, measured
        if default_key in table:
            cfg = pick_bucket(table[default_key], m)
            if cfg is not None:
                return cfg, False
    return heuristic(m), False
