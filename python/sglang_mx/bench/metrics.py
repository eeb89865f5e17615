"""Per-request records and their summary: percentiles, throughput, hit rate, goodput."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

PERCENTILES = (50, 90, 95, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside [0, 100]")
    data = sorted(values)
    if not data:
        return math.nan
    pos = (len(data) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def distribution(values: Sequence[float]) -> dict[str, float]:
    out = {"mean": sum(values) / len(values) if values else math.nan}
    out.update({f"p{q}": percentile(values, q) for q in PERCENTILES})
    out["max"] = max(values) if values else math.nan
    return out


@dataclass
class RequestResult:
    """What the runner measured for one request (times in seconds from the run's start)."""

    request_id: str
    start: float = 0.0
    ttft: float = math.nan
    e2e: float = math.nan
    itl: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    expected_cached: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def tpot(self) -> float:
        """Mean time per output token after the first."""
        if self.completion_tokens <= 1:
            return math.nan
        return (self.e2e - self.ttft) / (self.completion_tokens - 1)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Slo:
    ttft_p95_s: float = 5.0
    # per-request goodput limits (None = unconstrained)
    ttft_s: float | None = 5.0
    tpot_s: float | None = None

    def met_by(self, r: RequestResult) -> bool:
        if not r.ok:
            return False
        if self.ttft_s is not None and not r.ttft <= self.ttft_s:
            return False
        return self.tpot_s is None or not r.tpot > self.tpot_s


def summarize(results: Sequence[RequestResult], slo: Slo | None = None) -> dict:
    """Aggregate figures of one run; duration spans the first send to the last completion."""
    slo = slo or Slo()
    ok = [r for r in results if r.ok]
    if ok:
        duration = max(r.start + r.e2e for r in ok) - min(r.start for r in results)
    else:
        duration = math.nan
    prompt = sum(r.prompt_tokens for r in ok)
    cached = sum(r.cached_tokens for r in ok)
    expected = sum(r.expected_cached for r in ok)
    out_tokens = sum(r.completion_tokens for r in ok)
    good = [r for r in ok if slo.met_by(r)]
    per_s = (lambda x: x / duration) if duration and duration > 0 else (lambda x: math.nan)
    ttft = distribution([r.ttft for r in ok])
    return {
        "requests": len(results),
        "completed": len(ok),
        "errors": len(results) - len(ok),
        "first_error": next((r.error for r in results if not r.ok), ""),
        "success_rate": len(ok) / len(results) if results else math.nan,
        "duration_s": duration,
        "request_throughput": per_s(len(ok)),
        "input_tokens": prompt,
        "output_tokens": out_tokens,
        "cached_tokens": cached,
        "expected_cached_tokens": expected,
        "hit_rate": cached / prompt if prompt else math.nan,
        "expected_hit_rate": expected / prompt if prompt else math.nan,
        "input_tok_s": per_s(prompt),
        "output_tok_s": per_s(out_tokens),
        "total_tok_s": per_s(prompt + out_tokens),
        "ttft_s": ttft,
        "itl_s": distribution([x for r in ok for x in r.itl]),
        "tpot_s": distribution([r.tpot for r in ok if not math.isnan(r.tpot)]),
        "e2e_s": distribution([r.e2e for r in ok]),
        "output_tok_s_per_user": distribution(
            [1.0 / r.tpot for r in ok if r.tpot and not math.isnan(r.tpot)]
        ),
        "slo": asdict(slo),
        "slo_met": bool(ok) and len(ok) == len(results) and ttft["p95"] <= slo.ttft_p95_s,
        "goodput_req_s": per_s(len(good)),
        "goodput_output_tok_s": per_s(sum(r.completion_tokens for r in good)),
    }
