"""The launch-recipe file (mi355x.json), read once, and what every kind of recipe in it shares:
`@group` references expanded, a flag set twice refused. Used by the single-node recipes
(`sglang_mx.recipes`) and the prefill/decode ones (`recipes.pd`)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "mi355x.json"


@cache
def load() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def expand(name: str, items: list[str]) -> tuple[str, ...]:
    """`items` with each "@group" replaced by that group's flags; recipe `name` (for the
    message) is refused if it sets a flag twice, which argparse would keep the last of silently."""
    data = load()
    args: list[str] = []
    for item in items:
        args.extend(data[item[1:]] if item.startswith("@") else [item])
    flags = [a for a in args if a.startswith("--")]
    doubled = sorted({f for f in flags if flags.count(f) > 1})
    if doubled:
        raise ValueError(f"launch recipe {name!r} sets {', '.join(doubled)} more than once")
    return tuple(args)


def takes_value(args: list[str] | tuple[str, ...], i: int) -> bool:
    """Whether flag `args[i]` is followed by its value (every SGLang flag takes one or none)."""
    return i + 1 < len(args) and not args[i + 1].startswith("--")
