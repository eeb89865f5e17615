"""Typed records: read from the JSON data tables (hardware, links, efficiency profiles: one
record per top-level key, which becomes its `name`; keys starting with "_" are notes), looked up
by name, and copied with overrides (workload and scheduler settings)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def load_records(path: str | Path, cls: type[T]) -> dict[str, T]:
    raw: dict[str, Any] = json.loads(Path(path).read_text())
    return {k: cls(name=k, **fields) for k, fields in raw.items() if not k.startswith("_")}


def lookup(table: dict[str, T], name: str, what: str) -> T:
    """table[name], or a KeyError naming what was asked for and what is known."""
    if name not in table:
        raise KeyError(f"unknown {what} {name!r}; known: {', '.join(table)}")
    return table[name]


class Overridable:
    """For frozen dataclasses of settings: a copy with the given fields replaced (None keeps the
    field, so unset CLI flags pass straight through) and the plain-dict view."""

    def with_overrides(self, **kwargs):
        return replace(self, **{k: v for k, v in kwargs.items() if v is not None})

    def to_dict(self) -> dict:
        return asdict(self)
