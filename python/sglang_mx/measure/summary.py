"""A run's summary as a typed record: the figures metrics.summarize computes, each a field, with
one JSON round trip (result.json holds `to_dict()` under each point's "summary").

A figure is named the way claims, report columns and compare rows name it: a scalar field
(`output_tok_s`) or a distribution's statistic (`tpot_s.p50`). FIGURES lists every name, so a
claim or a column naming one the record lacks is refused where it is read, and a renamed field
fails at import rather than at the end of a run."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from sglang_mx.measure.run_checks import (
    PARTS,
    Acceptance,
    CacheBounds,
    SelfCheck,
    ServerMetrics,
    TokenAudit,
)

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Distribution:
    """One latency (or per-user rate) over a run's requests; NaN where there were none."""

    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> Distribution:
        return cls(**d)


STATISTICS = tuple(f.name for f in fields(Distribution))
if STATISTICS != ("mean", *(f"p{q}" for q in PERCENTILES), "max"):
    raise ImportError(f"Distribution's fields {STATISTICS} do not follow PERCENTILES")


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """metrics.summarize's record of one run, in its key order, then the runner's checks as
    typed parts (measure/run_checks.py). A field that defaults to None is one an older result.json
    may lack: None is left out of to_dict, so such a file reads back unchanged. `extra` holds
    what the planner adds (its cost, binding shares, steps: plan/records.py), after the rest."""

    requests: int
    completed: int
    errors: int
    first_error: str | None = None
    success_rate: float
    duration_s: float
    request_throughput: float
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    expected_cached_tokens: int
    reachable_cached_tokens: int | None = None
    possible_cached_tokens: int | None = None
    hit_rate: float
    expected_hit_rate: float
    input_tok_s: float
    output_tok_s: float
    total_tok_s: float
    ttft_s: Distribution
    itl_s: Distribution
    tpot_s: Distribution
    e2e_s: Distribution
    output_tok_s_per_user: Distribution
    slo: dict
    goodput_req_s: float
    goodput_output_tok_s: float
    goodput_requests: int | None = None
    slo_gates: tuple[dict, ...] | None = None
    slo_met: bool
    cache_bounds: CacheBounds | None = None
    audit: TokenAudit | None = None
    speculative: Acceptance | None = None
    selfcheck: SelfCheck | None = None
    server_metrics: ServerMetrics | None = None
    extra: dict | None = None

    def to_dict(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name == "extra":
                out.update(value)
            elif hasattr(value, "to_dict"):
                out[f.name] = value.to_dict()
            else:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, d: dict) -> RunSummary:
        """The inverse of to_dict: keys that are not fields go to `extra`; a field with no
        default that `d` lacks is a TypeError naming it."""
        known = {f.name for f in fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in d.items() if k in known}
        for name in DISTRIBUTIONS:
            if name in kwargs:
                kwargs[name] = Distribution.from_dict(kwargs[name])
        for name, part in PARTS.items():
            if name in kwargs:
                kwargs[name] = part.from_dict(kwargs[name])
        if "slo_gates" in kwargs:
            kwargs["slo_gates"] = tuple(kwargs["slo_gates"])
        extra = {k: v for k, v in d.items() if k not in known}
        return cls(**kwargs, extra=extra or None)

    def value(self, figure: str) -> float:
        """A figure by its name (`output_tok_s`, `tpot_s.p50`): NaN where this run lacks it."""
        name, _, statistic = figure.partition(".")
        value = getattr(self, name, None)
        if statistic:
            value = getattr(value, statistic, None)
        return math.nan if value is None else value

    def failed_gates(self) -> list[dict]:
        """The SLO gates this run missed (none recorded: none missed)."""
        return [g for g in self.slo_gates or () if not g["met"]]


DISTRIBUTIONS = tuple(f.name for f in fields(RunSummary) if f.type == "Distribution")
SCALARS = tuple(
    f.name
    for f in fields(RunSummary)
    if f.type in ("int", "float", "int | None") and f.name not in DISTRIBUTIONS
)
FIGURES = SCALARS + tuple(f"{d}.{s}" for d in DISTRIBUTIONS for s in STATISTICS)


def is_figure(name: str) -> bool:
    """Whether `name` is a figure of a run summary (`output_tok_s`, `tpot_s.p50`)."""
    return name in FIGURES


def check_figures(names, where: str) -> None:
    """Raise (at import, where a module lists figures) on any name no summary has."""
    bad = [n for n in names if not is_figure(n)]
    if bad:
        raise ImportError(f"{where} names {bad}: not figures of a run summary ({FIGURES})")
