"""The checks a measured run carries beside its figures, each a typed part of the run summary
(summary.RunSummary): the token audit, the load generator's self-check, speculative acceptance
from the server's counters, the server's load gauges and the cached-token bounds per request.

The runner's checks (bench/run/audit.py, bench/load/client_check.py, bench/run/acceptance.py,
bench/load/promscrape.py, bench/load/reach.py) build these records; reports and verdicts read
their fields. Each has one JSON round trip (`to_dict` / `from_dict`), the shape result.json has
always held, so committed results read back unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass


def _plain(record) -> dict:
    """A record's fields as JSON: tuples as lists, nested records the same way."""
    out = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if is_dataclass(value):
            value = _plain(value)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


@dataclass(frozen=True, kw_only=True)
class TokenAudit:
    """Three counts of the same tokens against each other (bench/run/audit.py): `checks` holds
    one row per comparison (its counts under `client`, `usage`, `server`), `server_counters` the
    server's counter increase over the measured requests."""

    ok: bool
    checks: tuple[dict, ...]
    failed: tuple[str, ...]
    skipped: tuple[str, ...]
    tolerance: float
    retokenize_tolerance: float
    message: str
    server_counters: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict) -> TokenAudit:
        tuples = ("checks", "failed", "skipped")
        return cls(**{k: tuple(v) if k in tuples else v for k, v in d.items()})


@dataclass(frozen=True, kw_only=True)
class Lag:
    """A lag's spread over a run (seconds; NaN where nothing was measured)."""

    min: float
    p50: float
    p99: float
    max: float
    n: int


@dataclass(frozen=True, kw_only=True)
class SelfCheck:
    """The load generator's check of itself (bench/load/client_check.py): did it send on time,
    how busy was it, and so was the run client-bound (`reasons` say why)."""

    schedule_lag_s: Lag
    early_sends: int
    loop_lag_s: Lag
    client_cpu_s: float
    wall_s: float
    client_cpu_fraction: float
    processes: int
    client_cpu_fraction_by_process: tuple[float, ...]
    calibration: dict | None
    ceiling_basis: str | None
    client_bound: bool
    reasons: tuple[str, ...]

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict) -> SelfCheck:
        return cls(
            **{
                **d,
                "schedule_lag_s": Lag(**d["schedule_lag_s"]),
                "loop_lag_s": Lag(**d["loop_lag_s"]),
                "client_cpu_fraction_by_process": tuple(d["client_cpu_fraction_by_process"]),
                "reasons": tuple(d["reasons"]),
            }
        )


@dataclass(frozen=True)
class Acceptance:
    """Speculative decoding's real acceptance from the server's counters
    (bench/run/acceptance.py): not `counted` when the server exports none; else whether a draft
    ran and, when one did, its accept length with the counts behind it (`counts`, by name)."""

    counted: bool
    speculative: bool | None = None
    accept_length: float | None = None
    counts: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        if not self.counted:
            return {"counted": False}
        out = {"counted": True, "speculative": self.speculative}
        return out | {"accept_length": self.accept_length} | self.counts

    @classmethod
    def from_dict(cls, d: dict) -> Acceptance:
        head = ("counted", "speculative", "accept_length")
        return cls(*(d.get(k) for k in head), {k: v for k, v in d.items() if k not in head})


@dataclass(frozen=True)
class ServerMetrics:
    """The server's load gauges sampled during a run (bench/load/promscrape.py): the engine
    that exported them, the number of samples, and mean / max per gauge it exports."""

    engine: str
    samples: int
    gauges: dict = field(default_factory=dict)  # gauge name -> {"mean", "max"}

    def to_dict(self) -> dict:
        return {"engine": self.engine, "samples": self.samples} | self.gauges

    @classmethod
    def from_dict(cls, d: dict) -> ServerMetrics:
        gauges = {k: v for k, v in d.items() if k not in ("engine", "samples")}
        return cls(d["engine"], d["samples"], gauges)


@dataclass(frozen=True)
class CacheBounds:
    """Requests whose measured cached tokens fell outside what they could have found
    (bench/load/reach.py): below what the server held when each was sent, above what it held by
    its first token, and the first such request."""

    below_reachable: int
    above_possible: int
    first: str

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict) -> CacheBounds:
        return cls(**d)


# RunSummary's check parts: field name -> record type, in result.json's order
PARTS = {
    "cache_bounds": CacheBounds,
    "audit": TokenAudit,
    "speculative": Acceptance,
    "selfcheck": SelfCheck,
    "server_metrics": ServerMetrics,
}
