"""A measuring verb's result as one typed record: where and when it ran (stamp), the workload,
the sweep of typed points (a run is a sweep of one point, a verify run's repeats a sweep of kind
"repeat"), the GPUs its cost counts, the cost, the warnings and, for `bench verify`, the claim
with its reading before the run, the load generator's choice and the verdict (Claimed).

result.json is `to_dict()`; `from_dict` is the one way back (`bench report`, `bench compare`).
The report writers (markdown.py, html_page.py, measure/result_files.py's plots) take the
record."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.bench.claims.verdict import Verdict
from sglang_mx.bench.run.pipeline import Measurement
from sglang_mx.bench.run.runner import RunConfig
from sglang_mx.measure.metrics import Slo
from sglang_mx.measure.stamp import stamp
from sglang_mx.measure.sweep import Knee, Sweep


@dataclass(frozen=True)
class Claimed:
    """What a verify run adds: the claim file as read, the trace's source (`{}` for a workload
    it generated), the load generator's process choice, the verdict and the claim's own check."""

    claim: dict
    trace_source: dict | None
    load_generator: dict
    verdict: Verdict
    claim_check: dict


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    stamp: dict
    workload: dict
    sweep: Sweep
    gpus: int
    warnings: tuple[str, ...] = ()
    cost: dict | None = None
    claimed: Claimed | None = None

    def to_dict(self) -> dict:
        """result.json, in the key order each verb has always written."""
        head = {"stamp": self.stamp, "workload": self.workload}
        body = {"sweep": self.sweep.to_dict(), "gpus": self.gpus}
        warnings = {"warnings": list(self.warnings)}
        c = self.claimed
        if c is None:
            return head | body | warnings | ({} if self.cost is None else {"cost": self.cost})
        return (
            head
            | {"trace_source": c.trace_source, "claim": c.claim}
            | body
            | {"cost": self.cost, "load_generator": c.load_generator}
            | {"verdict": c.verdict.to_dict(), "claim_check": c.claim_check}
            | warnings
        )

    @classmethod
    def from_dict(cls, d: dict) -> BenchResult:
        """The inverse of to_dict; an unknown key is a TypeError naming it."""
        d = dict(d)
        claimed = None
        if "verdict" in d:
            claimed = Claimed(
                claim=d.pop("claim"),
                trace_source=d.pop("trace_source"),
                load_generator=d.pop("load_generator"),
                verdict=Verdict.from_dict(d.pop("verdict")),
                claim_check=d.pop("claim_check"),
            )
        return cls(
            **{
                **d,
                "sweep": Sweep.from_dict(d["sweep"]),
                "warnings": tuple(d.get("warnings", ())),
            },
            claimed=claimed,
        )

    @property
    def name(self) -> str:
        """The workload's name, as titles say it."""
        return self.workload.get("name", "custom")


def measured(
    m: Measurement,
    cfg: RunConfig,
    hardware: str | None,
    workload: dict,
    kind: str,
    slo: Slo,
    knee: Knee | None,
    gpus: int,
    warnings: tuple[str, ...] = (),
    config: dict | None = None,
) -> BenchResult:
    """The record of a measurement: stamped with `hardware` and the endpoint's config (plus
    `config`), its points as a sweep of `kind` with `knee`, `warnings` before the runner's."""
    endpoint = {"url": cfg.base_url, "api": cfg.api, "model": m.model, "send_ids": cfg.send_ids}
    return BenchResult(
        stamp=stamp(hardware, endpoint | (config or {})),
        workload=workload,
        sweep=Sweep(kind, m.points, knee, slo.ttft_p95_s, slo.describe()),
        gpus=gpus,
        warnings=tuple(warnings) + m.warnings,
    )
