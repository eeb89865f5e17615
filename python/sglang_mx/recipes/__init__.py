"""Launch recipes as data (STYLE 18): each production layout's SGLang flags in one JSON file,
rendered for a GPU node by `sglang-mx recipe NAME` (what scripts/launch/*.sh exec) and scaled to
the 2-core CPU box by `cpu_args` (what the suite starts), every substitution named with its
reason, so a recipe cannot drift into flags that crash without the suite failing.

Prefill/decode recipes (one engine per role and a router): `recipes.pd`, re-exported here."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.recipes import pd
from sglang_mx.recipes.book import DATA, expand, load, takes_value

__all__ = ["DATA", "Recipe", "Substitution", "cpu_args", "names", "pd", "recipe", "render_args"]


@dataclass(frozen=True)
class Recipe:
    name: str
    about: str
    engines: int
    gpus_per_engine: int
    args: tuple[str, ...]  # one engine's SGLang flags (no model, host or port)
    router: tuple[str, ...]  # smg (SGLang Model Gateway) flags when engines > 1


@dataclass(frozen=True)
class Substitution:
    flag: str
    node: str  # what the recipe says ("" when the CPU run adds the flag)
    cpu: str  # what the CPU run passes ("" when it drops the flag)
    why: str


def names() -> list[str]:
    return sorted(load()["recipes"])


def recipe(name: str) -> Recipe:
    data = load()
    if name not in data["recipes"]:
        known = ", ".join([*names(), *pd.names()])
        raise KeyError(f"no launch recipe {name!r}; known: {known}")
    r = data["recipes"][name]
    return Recipe(
        name, r["about"], int(r["engines"]), int(r["gpus_per_engine"]), expand(name, r["args"]),
        tuple(r.get("router", ())),
    )  # fmt: skip


def cpu_args(name: str) -> tuple[list[str], list[Substitution]]:
    """One engine of recipe `name` as the CPU box runs it at `cpu_scale.ranks` ranks: the
    recipe's flags with the dropped ones removed, the scaled ones set to the rank count and the
    added ones appended; and the list of what changed, each with its reason."""
    scale = load()["cpu_scale"]
    ranks = str(scale["ranks"])
    src = list(recipe(name).args)
    out: list[str] = []
    subs: list[Substitution] = []
    i = 0
    while i < len(src):
        flag = src[i]
        value = src[i + 1] if takes_value(src, i) else ""
        width = 2 if value else 1
        if flag in scale["drop"]:
            subs.append(Substitution(flag, value, "", scale["drop"][flag]))
        elif flag in scale["scale"] and value != ranks:
            out += [flag, ranks]
            subs.append(Substitution(flag, value, ranks, scale["scale"][flag]))
        else:
            out += src[i : i + width]
        i += width
    for added, why in scale["add"].items():
        flag, _, value = added.partition(" ")
        out += [flag, *([value] if value else [])]
        subs.append(Substitution(flag, "", value or "(set)", why))
    return out, subs


def render_args(name: str) -> list[str]:
    """One engine's flags for a GPU node, as scripts/launch/*.sh pass them to sglang-mx serve."""
    return list(recipe(name).args)
