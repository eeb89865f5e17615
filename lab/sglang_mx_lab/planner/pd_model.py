"""The planner's model of one prefill + one decode server, built from calibration data, and the
sweep it predicts (validate_pd_cpu freezes it before measuring).

Three builds from the same measurements, no sweep rate among them:
- `as_specified`: both sides run the plain server's calibrated step cost (one core, as each
  side has); the handoff per lone request is its PD TTFT minus the plain server's TTFT without
  that server's first decode step (handoff.py).
- `with_side_speeds`: the same, each side's steps scaled by how much slower that side ran the
  same lone requests than the plain server did (prefill: SGLang's own prefill_forward stage on
  both servers; decode: the lone requests' median ITL); the handoff is then the PD TTFT minus
  the frontend and the scaled prefill step, so the prefill work sits on the prefill engine and
  not in a delay that overlaps everything.
- `pd_calibrated`: the prefill side runs the plain server's calibrated step cost scaled to
  the PD prefill server's own lone prefill_forward stage; the decode side runs a step cost
  fitted on the PD decode server itself and a first-token lag: in the build the check claims,
  both from an open-loop Poisson ramp through the router (pd_live.py; the lag constant or an
  exponential draw per request); in its closed-loop variant, the step from closed-loop
  batches of 1-24 rows at two context lengths and the lag from busy-decode arrivals
  (pd_decode.py); the handoff is the PD TTFT minus the frontend, that prefill step and the
  lag."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

from sglang_mx.capacity.modelspec import load_model
from sglang_mx.capacity.workload import WorkloadSpec
from sglang_mx.measure.metrics import summarize
from sglang_mx.measure.sweep import sweep_specs
from sglang_mx.measure.tracegen import generate
from sglang_mx.plan.knee import knee_at, search_knee
from sglang_mx.plan.scheduler_config import SchedulerConfig
from sglang_mx.plan.sim import Group, build_groups, simulate
from sglang_mx.plan.stepcost import LinearStepCost, Work

from sglang_mx_lab.planner.handoff import Handoff, HandoffSample, fit_handoff
from sglang_mx_lab.planner.pd_lone import LoneStats

KV_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0}


@dataclass(frozen=True)
class PdModel:
    name: str
    prefill: SchedulerConfig
    decode: SchedulerConfig
    prefill_cost: LinearStepCost
    decode_cost: LinearStepCost
    frontend_s: float
    handoff: Handoff
    factors: tuple[float, float] = (1.0, 1.0)  # prefill, decode step scale vs the plain server
    first_token_lag: float = 0.0  # decode steps the first token waits (pd_decode.fit_lag)
    lag_shape: str = "constant"  # or "exponential": that many steps on average (pd_live.py)

    def groups(self) -> list[Group]:
        return build_groups(self.prefill, self.prefill_cost, role="prefill") + build_groups(
            self.decode, self.decode_cost, role="decode"
        )

    def point(self, trace) -> dict:
        return summarize(self.run(trace).request_results(self.frontend_s)).to_dict()

    def run(self, trace):
        return simulate(
            trace,
            self.groups(),
            handoff_s=self.handoff,
            handoff_serial_s=self.handoff.serial_s,
            first_token_lag=self.first_token_lag,
            lag_draw=exponential_draw if self.lag_shape == "exponential" else None,
        )

    def predict(self, spec: WorkloadSpec, rates) -> list[dict]:
        specs = sweep_specs(spec, "rate", rates)
        pairs = zip(rates, specs, strict=True)
        return [{"x": r, "summary": self.point(generate(s))} for r, s in pairs]

    def knee(self, spec: WorkloadSpec, low_rate: float, slo_factor: float):
        return search_knee(lambda r: self.predict(spec, [r])[0], low_rate, slo_factor)

    def knee_at(self, spec: WorkloadSpec, slo_s: float, low_rate: float) -> float:
        """The predicted knee rate against a fixed SLA (TTFT p95 <= slo_s)."""
        return knee_at(lambda r: self.predict(spec, [r])[0], slo_s, low_rate)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "prefill_factor": self.factors[0],
            "decode_factor": self.factors[1],
            "prefill_cost": dataclasses.asdict(self.prefill_cost),
            "decode_cost": dataclasses.asdict(self.decode_cost),
            "frontend_s": self.frontend_s,
            "first_token_lag_steps": self.first_token_lag,
            "first_token_lag_shape": self.lag_shape,
            "handoff": self.handoff.to_dict(),
        }


def exponential_draw(r) -> float:
    """A unit-mean exponential draw fixed by the request's id (the same request draws the same
    under every lag a fit tries)."""
    u = int.from_bytes(hashlib.blake2b(r.id.encode(), digest_size=8).digest(), "big") / 2**64
    return -math.log1p(-u)


def scaled(cost: LinearStepCost, k: float) -> LinearStepCost:
    """Every time term of `cost` times `k`."""
    return dataclasses.replace(
        cost,
        **{
            f.name: getattr(cost, f.name) * k
            for f in dataclasses.fields(cost)
            if f.name[-2:] == "_s"
        },
    )


def kv_bytes_per_token(model_dir, info: dict) -> float:
    """What one prompt token ships: the model's latent + index-key bytes at the served KV dtype
    (/get_server_info kv_cache_dtype; auto = the model dtype)."""
    kv = str(info.get("kv_cache_dtype") or "auto")
    kv_bytes = 1.0 if "fp8" in kv else KV_DTYPE_BYTES.get(str(info.get("dtype")), 2.0)
    return load_model(str(model_dir)).kv_bytes_per_token(kv_bytes, 1.0)


def _ratio(values: list[float]) -> float:
    ok = [v for v in values if math.isfinite(v) and v > 0]
    return sum(ok) / len(ok) if ok else 1.0


def side_factors(plain: dict[int, LoneStats], pd: dict[int, LoneStats]) -> tuple[float, float]:
    """(prefill, decode) step scale of the PD sides against the plain server, averaged over
    the prompt lengths both measured (1.0 where a figure is missing)."""
    lens = sorted(set(plain) & set(pd))
    k_p = _ratio([pd[n].prefill_forward_s / plain[n].prefill_forward_s for n in lens])
    k_d = _ratio([pd[n].itl_median / plain[n].itl_median for n in lens])
    return k_p, k_d


def as_specified(sides, cal, plain, pd, bytes_per_token, transfer) -> PdModel:
    samples = [
        HandoffSample(n, pd[n].ttft_median, plain[n].ttft_median, _decode_step(cal.cost, n))
        for n in sorted(set(plain) & set(pd))
    ]
    handoff = fit_handoff(samples, bytes_per_token, transfer)
    return PdModel("as specified", *sides, cal.cost, cal.cost, cal.frontend_s, handoff)


def with_side_speeds(sides, cal, plain, pd, bytes_per_token, transfer) -> PdModel:
    k_p, k_d = side_factors(plain, pd)
    cost_p, cost_d = scaled(cal.cost, k_p), scaled(cal.cost, k_d)
    samples = [
        HandoffSample(n, pd[n].ttft_median, cal.frontend_s + _prefill_step(cost_p, n), 0.0)
        for n in sorted(set(plain) & set(pd))
    ]
    handoff = fit_handoff(samples, bytes_per_token, transfer)
    return PdModel("with side speeds", *sides, cost_p, cost_d, cal.frontend_s, handoff, (k_p, k_d))


def pd_calibrated(
    sides, cal, pd, decode_cost, bytes_per_token, transfer, lag=0.0, shape="constant"
) -> PdModel:
    """The prefill side runs the plain fit scaled to the PD prefill server's own lone
    prefill_forward stage (nothing follows a lone prefill there, so the stage is its step; on
    the plain server the stage also holds the first decode step); `lag`: decode steps the
    first token waits after its request joins (pd_decode.fit_lag); a lone request's TTFT holds
    `lag` of its own first decode step, which is not handoff."""
    lens = sorted(pd)
    k_p = _ratio([pd[n].prefill_forward_s / _prefill_step(cal.cost, n) for n in lens])
    cost_p = scaled(cal.cost, k_p)
    samples = [
        HandoffSample(
            n,
            pd[n].ttft_median,
            cal.frontend_s + _prefill_step(cost_p, n) + lag * _decode_step(decode_cost, n),
            0.0,
        )
        for n in lens
    ]
    handoff = fit_handoff(samples, bytes_per_token, transfer)
    return PdModel(
        "PD-calibrated",
        *sides,
        cost_p,
        decode_cost,
        cal.frontend_s,
        handoff,
        (k_p, 1.0),
        first_token_lag=lag,
        lag_shape=shape,
    )


def _decode_step(cost, n: int) -> float:
    return cost([Work(decode=[n + 1])]).seconds


def _prefill_step(cost, n: int) -> float:
    return cost([Work(prefill=[(0, n)])]).seconds
