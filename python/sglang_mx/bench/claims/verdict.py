"""From N repeated measurements of a claimed figure to a verdict.

- the 95% confidence interval of the mean: mean +- t(0.975, N-1) * s / sqrt(N) (Student's t;
  repeats are few, so the normal 1.96 would be too narrow);
- ratio = mean / claimed;
- verdict, with every reason that led to it:
  - `inconclusive` when the run cannot speak for the claim (a scaled workload, other or unstated
    hardware; each reason says what would decide), or its figure cannot be judged (a
    client-bound run, fewer than 2 repeats) and nothing else refutes it, or the interval
    straddles the threshold;
  - `not reproduced` when requests failed, a repeat missed the claim's SLO, the token audit
    failed (the server misreports its usage), or the whole interval is on the wrong side of the
    threshold;
  - `reproduced` when the whole interval is on the right side: at least (1 - tolerance) x claimed
    for a throughput, at most (1 + tolerance) x claimed for a latency.

A verdict is a `Verdict` (frozen): result.json holds its `to_dict()` under "verdict", verdict.json
its FILE_KEYS; `from_dict` reads the former back."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

# two-sided 95% Student t quantiles, t(0.975, df) for df = 1..30
T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"


# verdict.json's keys, in its order (result.json's "verdict" holds every field)
FILE_KEYS = (
    "claim",
    "claimed",
    "measured",
    "ci95",
    "ratio",
    "verdict",
    "reasons",
    "scaled",
    "changes",
    "figure",
    "per",
    "values",
    "threshold",
    "tolerance",
    "repeats",
    "slo_source",
    "acceptance",
    "agreement",
    "task_eval",
)


@dataclass(frozen=True)
class Verdict:
    """The verdict record of a claim: decide() fills the numbers and the verdict, judge.judge
    the claim it is about and the gates' records (acceptance, task_eval, agreement: the JSON
    records of acceptance.py, task_eval.py and agreement.py), verify the SLO's source."""

    claimed: float
    measured: float
    values: tuple[float, ...]
    ci95: tuple[float, float]
    ratio: float
    threshold: float
    tolerance: float
    higher_is_better: bool
    verdict: str
    reasons: tuple[str, ...]
    acceptance: dict | None = None
    task_eval: dict | None = None
    agreement: dict | None = None
    claim: str = ""
    figure: str = ""
    per: str = ""
    claim_text: str = ""
    scaled: bool = False
    changes: tuple[str, ...] = ()
    repeats: int = 0
    gpus_under_test: int = 0
    slo_source: str = ""

    def to_dict(self) -> dict:
        """Every field, tuples as lists: result.json's "verdict"."""
        return {
            f.name: list(v) if isinstance(v, tuple) else v
            for f in fields(self)
            for v in (getattr(self, f.name),)
        }

    @classmethod
    def from_dict(cls, d: dict) -> Verdict:
        """The inverse of to_dict; an unknown key is a TypeError naming it."""
        tuples = {f.name for f in fields(cls) if str(f.type).startswith("tuple")}
        return cls(**{k: tuple(v) if k in tuples else v for k, v in d.items()})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.from_dict(json.loads(text))

    def file_json(self) -> str:
        """verdict.json: the FILE_KEYS of to_dict, in that order."""
        d = self.to_dict()
        return json.dumps({k: d[k] for k in FILE_KEYS}, indent=1, default=str)


def t975(df: int) -> float:
    return T975[df - 1] if 1 <= df <= len(T975) else 1.960


def ci95(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high); low and high are NaN for fewer than two values."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def decide(
    claimed: float,
    values: Sequence[float],
    higher_is_better: bool,
    tolerance: float,
    blockers: Sequence[str] = (),
    failures: Sequence[str] = (),
    figure_blockers: Sequence[str] = (),
) -> Verdict:
    """The verdict (see the module docstring); `blockers` make it inconclusive whatever
    the numbers (the run cannot speak for the claim), `failures` (requests failed, SLO missed,
    audit failed, draft off) make it not reproduced, and `figure_blockers` (a client-bound run)
    leave only the measured figure unjudged: failures still refute."""
    mean, lo, hi = ci95(values)
    ratio = mean / claimed if claimed else math.nan
    reasons = list(blockers) + list(failures) + list(figure_blockers)
    if len(values) < 2:
        reasons.append(f"{len(values)} repeat(s) give no interval: run --repeats 3 or more")
    threshold = claimed * (1 - tolerance if higher_is_better else 1 + tolerance)
    side = "at least" if higher_is_better else "at most"
    interval = f"95% interval [{lo:.4g}, {hi:.4g}] (mean {mean:.4g}, ratio {ratio:.3f})"
    if higher_is_better:
        right, wrong = lo >= threshold, hi < threshold
    else:
        right, wrong = hi <= threshold, lo > threshold
    if blockers:
        verdict = INCONCLUSIVE
    elif failures:
        verdict = NOT_REPRODUCED
    elif figure_blockers or len(values) < 2:
        verdict = INCONCLUSIVE
    elif right:
        verdict = REPRODUCED
        reasons.append(f"{interval} is {side} {threshold:.4g} (claimed x {threshold / claimed:g})")
    elif wrong:
        verdict = NOT_REPRODUCED
        reasons.append(f"{interval} is not {side} {threshold:.4g} anywhere")
    else:
        verdict = INCONCLUSIVE
        reasons.append(f"{interval} straddles {threshold:.4g}: more repeats may decide")
    return Verdict(
        claimed=claimed,
        measured=mean,
        values=tuple(values),
        ci95=(lo, hi),
        ratio=ratio,
        threshold=threshold,
        tolerance=tolerance,
        higher_is_better=higher_is_better,
        verdict=verdict,
        reasons=tuple(reasons),
    )
