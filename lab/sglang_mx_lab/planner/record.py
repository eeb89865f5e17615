"""The planner's results as JSON records: a result's plain attributes, named once."""

from __future__ import annotations

from typing import Any


def attributes(obj: object, *names: str) -> dict[str, Any]:
    """{name: obj.name} for each of `names`, in that order (properties included)."""
    return {name: getattr(obj, name) for name in names}
