"""Per-request records and their summary: percentiles, throughput, hit rate, goodput."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from sglang_mx.measure.summary import DISTRIBUTIONS, PERCENTILES, Distribution, RunSummary

# the distributions an SLO can gate, by the name a person reads
SLO_METRICS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "itl_s": "ITL", "e2e_s": "E2E"}
if not set(SLO_METRICS) <= set(DISTRIBUTIONS):
    raise ImportError(f"SLO_METRICS {list(SLO_METRICS)} are not all run-summary distributions")


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


def distribution(values: Sequence[float]) -> Distribution:
    """Mean, each of PERCENTILES and max of `values`."""
    return Distribution(
        mean=sum(values) / len(values) if values else math.nan,
        **{f"p{q}": percentile(values, q) for q in PERCENTILES},
        max=max(values) if values else math.nan,
    )


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
    expected_cached: int = 0  # the design: every earlier request's prompt in the cache
    # the design as far as the server could hold it when this request was sent (reach.py);
    # None where no runner counted it (then the design)
    reachable_cached: int | None = None
    # the most it could find: every request whose first token came before its own (reach.py)
    possible_cached: int | None = None
    error: str = ""
    requested_output: int = 0  # max_tokens asked for (all of it is due with ignore_eos)
    lag: float = math.nan  # schedule lag: actual send time - intended send time
    client_completion_tokens: int | None = None  # the streamed text re-encoded by the client
    client_prompt_tokens: int | None = None  # what the client sent, by its own tokenizer
    usage_reported: bool = False  # the server sent `usage` (else counts are the client's)
    worker: int = 0  # the load process that sent it (loadgen.py)
    output_text: str = field(default="", repr=False)  # streamed text, for the audit only

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
        d = asdict(self)
        d.pop("output_text")  # content stays out of result files
        return d

    def row(self) -> dict:
        """to_dict with the gaps summarized (count, p50, max): one request's line in a result
        file, a few hundred bytes however long its output."""
        d = self.to_dict()
        gaps = d.pop("itl")
        d["itl_s"] = {"n": len(gaps), "p50": percentile(gaps, 50),
                      "max": max(gaps) if gaps else math.nan}  # fmt: skip
        return d


@dataclass(frozen=True)
class Slo:
    """A latency SLO over TTFT, TPOT, ITL and E2E (seconds; None = unconstrained).

    A run meets it when every request succeeded and, for each constrained metric, the run's
    `percentile` of that metric is within its limit: TTFT against `ttft_p95_s`, TPOT against
    `tpot_s`, ITL (every inter-token gap of every request, pooled: the per-gap view) against
    `itl_s`, E2E against `e2e_s`. One request counts toward goodput when its own TTFT <= `ttft_s`,
    its TPOT (per-request: (E2E - TTFT) / (output tokens - 1)) <= `tpot_s`, the `percentile` of its
    own gaps <= `itl_s` and its E2E <= `e2e_s`. `ttft_p95_s` keeps its historical name: it is the
    TTFT limit at `percentile` (95 unless set)."""

    ttft_p95_s: float = 5.0
    # per-request goodput limits (None = unconstrained)
    ttft_s: float | None = 5.0
    tpot_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None
    percentile: int = 95

    def __post_init__(self) -> None:
        if self.percentile not in PERCENTILES:
            raise ValueError(f"SLO percentile {self.percentile}: use one of {PERCENTILES}")

    def met_by(self, r: RequestResult) -> bool:
        if not r.ok:
            return False
        if self.ttft_s is not None and not r.ttft <= self.ttft_s:
            return False
        if self.tpot_s is not None and r.tpot > self.tpot_s:  # NaN (one token) passes
            return False
        if self.itl_s is not None and r.itl and percentile(r.itl, self.percentile) > self.itl_s:
            return False
        return self.e2e_s is None or r.e2e <= self.e2e_s

    def gates(self) -> list[tuple[str, float]]:
        """(summary distribution key, limit) of every percentile gate this SLO sets."""
        out = [("ttft_s", self.ttft_p95_s)]
        out += [
            (k, v)
            for k, v in (("tpot_s", self.tpot_s), ("itl_s", self.itl_s), ("e2e_s", self.e2e_s))
            if v is not None
        ]
        return out

    def judge(self, summary: RunSummary) -> list[dict]:
        """Each gate against a summary: metric, percentile, limit, value, met."""
        rows = []
        for metric, limit in self.gates():
            value = summary.value(f"{metric}.p{self.percentile}")
            rows.append(
                {
                    "metric": metric,
                    "percentile": self.percentile,
                    "limit": limit,
                    "value": value,
                    "met": bool(value <= limit),
                }
            )
        return rows

    def describe(self) -> str:
        """e.g. "TTFT p95 <= 5.0 s, TPOT p95 <= 0.05 s" (each limit as the shortest float that
        reads back exactly, as the flags wrote it)."""
        return ", ".join(
            f"{SLO_METRICS[m]} p{self.percentile} <= {float(v)!r} s" for m, v in self.gates()
        )


def summarize(results: Sequence[RequestResult], slo: Slo | None = None) -> RunSummary:
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
    reachable = sum(r.expected_cached if r.reachable_cached is None else r.reachable_cached
                    for r in ok)  # fmt: skip
    possible = sum(r.expected_cached if r.possible_cached is None else r.possible_cached
                   for r in ok)  # fmt: skip
    out_tokens = sum(r.completion_tokens for r in ok)
    good = [r for r in ok if slo.met_by(r)]
    per_s = (lambda x: x / duration) if duration and duration > 0 else (lambda x: math.nan)
    summary = RunSummary(
        requests=len(results),
        completed=len(ok),
        errors=len(results) - len(ok),
        first_error=next((r.error for r in results if not r.ok), ""),
        success_rate=len(ok) / len(results) if results else math.nan,
        duration_s=duration,
        request_throughput=per_s(len(ok)),
        input_tokens=prompt,
        output_tokens=out_tokens,
        cached_tokens=cached,
        expected_cached_tokens=expected,
        reachable_cached_tokens=reachable,
        possible_cached_tokens=possible,
        hit_rate=cached / prompt if prompt else math.nan,
        expected_hit_rate=expected / prompt if prompt else math.nan,
        input_tok_s=per_s(prompt),
        output_tok_s=per_s(out_tokens),
        total_tok_s=per_s(prompt + out_tokens),
        ttft_s=distribution([r.ttft for r in ok]),
        itl_s=distribution([x for r in ok for x in r.itl]),
        tpot_s=distribution([r.tpot for r in ok if not math.isnan(r.tpot)]),
        e2e_s=distribution([r.e2e for r in ok]),
        output_tok_s_per_user=distribution(
            [1.0 / r.tpot for r in ok if r.tpot and not math.isnan(r.tpot)]
        ),
        slo=asdict(slo),
        goodput_req_s=per_s(len(good)),
        goodput_output_tok_s=per_s(sum(r.completion_tokens for r in good)),
        goodput_requests=len(good),
        slo_gates=(),
        slo_met=False,
    )
    gates = tuple(slo.judge(summary))
    met = bool(ok) and len(ok) == len(results) and all(g["met"] for g in gates)
    return dataclasses.replace(summary, slo_gates=gates, slo_met=met)
