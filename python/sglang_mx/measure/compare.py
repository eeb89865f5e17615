"""Head-to-head: two run (or knee) summaries as one table with B/A for every numeric figure."""

from __future__ import annotations

import math


def flatten(d: dict, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def ratio(a: float, b: float) -> float:
    if a == 0 or math.isnan(a) or math.isnan(b):
        return math.nan
    return b / a


def compare(a: dict, b: dict) -> list[dict]:
    """Rows {figure, a, b, ratio} for every numeric figure the two summaries share."""
    fa, fb = flatten(a), flatten(b)
    return [
        {"figure": k, "a": fa[k], "b": fb[k], "ratio": ratio(fa[k], fb[k])} for k in fa if k in fb
    ]


def fmt_number(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.4g}" if abs(x) < 1e5 else f"{x:,.0f}"


def markdown_table(rows: list[dict], label_a: str = "A", label_b: str = "B") -> str:
    lines = [f"| figure | {label_a} | {label_b} | {label_b} / {label_a} |", "|---|---:|---:|---:|"]
    lines += [
        f"| {r['figure']} | " + " | ".join(fmt_number(r[k]) for k in ("a", "b", "ratio")) + " |"
        for r in rows
    ]
    return "\n".join(lines)
