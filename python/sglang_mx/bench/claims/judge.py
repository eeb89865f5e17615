"""Judging a verify run's evidence against its claim: each gate (the hardware under test, the
token audit, the client's headroom, failed requests, the SLO, speculative acceptance, agreement
with a reference deployment, a task eval) gives blockers, failures and notes, and `judge` hands
them with the repeats' figures to verdict.decide. `bench verify` measures (run/), then calls
`judge` once; the evidence arrives as typed run summaries and plain records, nothing is read off
the command line here (JudgeSettings carries what the flags say)."""

from __future__ import annotations

import dataclasses
import math

from sglang_mx.bench.claims.verdict import Verdict, decide
from sglang_mx.bench.load.limits import BenchError
from sglang_mx.bench.run.agreement import DEFAULT_TOP1
from sglang_mx.bench.run.task_eval import TASKS
from sglang_mx.measure.run_checks import Acceptance
from sglang_mx.measure.summary import RunSummary, is_figure


@dataclasses.dataclass(frozen=True)
class JudgeSettings:
    """What verify's flags say about judging a claim, read off the command line once
    (from_args), so judge() takes no argparse Namespace."""

    hardware: str | None = None  # --hardware: the hardware under test, None when not stated
    gpus: int | None = None  # --gpus: GPUs under test, None for the hardware's (or claim's)
    tolerance: float | None = None  # --tolerance, None for the claim's
    agreement_top1: float | None = None  # --agreement-top1, None for the claim's or default

    @classmethod
    def from_args(cls, args) -> JudgeSettings:
        return cls(args.hardware, args.gpus, args.tolerance, getattr(args, "agreement_top1", None))


def claims_own_hardware(claim, hardware: str | None) -> bool:
    """--hardware names the claim's own hardware (which need not be in data/hardware.json:
    a claim about this CPU box names `CPU`)."""
    return bool(hardware) and hardware.lower() == claim.hardware[0].lower()


def hardware_blockers(claim, under: JudgeSettings) -> list[str]:
    name, gpus = claim.hardware
    if not under.hardware:
        return [
            f"hardware under test not stated: the claim is for {gpus}x {name}; run it there "
            f"and say so (--hardware {name} --gpus {gpus}) to have it judged"
        ]
    if claims_own_hardware(claim, under.hardware):
        mine = under.gpus or gpus
        if mine == gpus:
            return []
        return [f"{mine}x {name} under test is not the claim's {gpus}x {name}: run on {gpus}"]
    from sglang_mx.capacity.hardware import get_hardware

    try:
        hw = get_hardware(under.hardware)
        mine, named = under.gpus or hw.gpus_per_node, hw.name
    except KeyError:  # not in data/hardware.json (this CPU box): named as given
        mine, named = under.gpus or 1, under.hardware
    return [
        f"hardware under test {mine}x {named} is not the claim's {gpus}x {name}: a run on "
        f"{gpus}x {name} would decide"
    ]


def speculative_gate(claim_spec: dict | None, runs: list[Acceptance], tolerance: float) -> dict:
    """Blockers, failures and notes of a verify run's acceptance against the claim's
    `speculative` section (claim_file.py): a draft claimed but absent, or a real accept
    length below (1 - tolerance) x the claimed one, refutes; a simulated one is reported beside
    the real."""
    out: dict = {"blockers": [], "failures": [], "notes": [], "record": None}
    if not claim_spec:
        return out
    claimed = claim_spec.get("accept_length")
    simulated = bool(claim_spec.get("simulated"))
    lengths = [r.accept_length for r in runs]
    out["record"] = {"algorithm": claim_spec.get("algorithm"), "claimed": claimed,
                     "simulated": simulated, "measured": lengths}  # fmt: skip
    if not all(r.counted for r in runs):
        out["blockers"].append(
            "the claim states speculative decoding, but the server exports no counters to read "
            "its acceptance (SGLang: --enable-metrics): a run with them would decide"
        )
        return out
    off = [i for i, r in enumerate(runs, 1) if not r.speculative]
    if off:
        out["failures"].append(
            f"the claim states speculative decoding ({claim_spec.get('algorithm')}), but "
            f"repeat(s) {', '.join(map(str, off))} ran no verify step: the draft is off"
        )
        return out
    mean = sum(lengths) / len(lengths)
    if claimed is None:
        out["notes"].append(f"accept length {mean:.3g} measured; the claim states none")
    elif simulated:
        out["notes"].append(
            f"the claimed figure used simulated acceptance (accept length {claimed:g}); this "
            f"run's drafts really accepted {mean:.3g}: the verdict is on the figure at the real "
            "acceptance"
        )
    elif mean < claimed * (1 - tolerance):
        out["failures"].append(
            f"accept length {mean:.3g} measured (SGLang's counters), below the claimed "
            f"{claimed:g} by more than {tolerance:.0%}"
        )
    else:
        out["notes"].append(f"accept length {mean:.3g} measured against {claimed:g} claimed")
    return out


def agreement_bounds(claim_raw: dict, top1_flag: float | None) -> tuple[float, float | None, str]:
    """(top-1 minimum, KL maximum or None, where they came from): the claim's `agreement`
    section, a flag given on the command line over it, else the defaults."""
    stated = claim_raw.get("agreement") or {}
    kl_max = stated.get("kl_max")
    if top1_flag is not None:
        if not 0 < top1_flag <= 1:
            raise BenchError(f"--agreement-top1 {top1_flag}: a share in (0, 1]")
        return top1_flag, kl_max, f"--agreement-top1 {top1_flag:g}"
    if "top1_min" in stated:
        return float(stated["top1_min"]), kl_max, f"the claim's ({stated.get('source', '')})"
    return DEFAULT_TOP1, kl_max, f"the default (top-1 >= {DEFAULT_TOP1:g})"


def agreement_gate(record: dict | None, top1_min: float, kl_max: float | None, source: str) -> dict:
    """Failures and notes of the agreement gate; no record (no --reference): nothing."""
    out: dict = {"failures": [], "notes": []}
    if record is None:
        return out
    what = (
        f"agreement with the reference {record['reference']}: top-1 {record['top1']:.3f}, "
        f"top-{record['top_k']} KL {record['kl_topk_mean']:.3g} nats over "
        f"{record['positions']} positions"
    )
    bound = f"top-1 >= {top1_min:g}" + (f", KL <= {kl_max:g}" if kl_max is not None else "")
    low = record["top1"] < top1_min
    high_kl = kl_max is not None and record["kl_topk_mean"] > kl_max
    if low or high_kl:
        out["failures"].append(
            f"accuracy: {what}, outside {bound} (bounds: {source}): the endpoint does not "
            "compute what the reference deployment of the model does"
        )
    else:
        out["notes"].append(f"{what}, within {bound} (bounds: {source})")
    return out


def task_gate(record: dict | None, claimed: dict | None, tolerance: float) -> dict:
    """Failures, blockers and notes of the task-eval gate against the claim's `accuracy`."""
    out: dict = {"failures": [], "blockers": [], "notes": []}
    if record is None:
        return out
    lo, hi = record["ci95"]
    what = (
        f"{record['task']} pass@1 {record['score']:.3f} ({record['passed']} of "
        f"{record['problems']} problems; 95% interval [{lo:.3f}, {hi:.3f}])"
    )
    if record["problems"] < record["of"]:
        what += f", the first {record['problems']} of {record['of']}"
    if not claimed:
        out["notes"].append(f"accuracy: {what}; the claim states no score")
        return out
    floor = claimed["score"] * (1 - tolerance)
    if hi < floor:
        out["failures"].append(
            f"accuracy: {what}, below the claimed {claimed['score']:g} ({claimed['source']}) "
            f"x {1 - tolerance:g} = {floor:.3g} over the whole interval"
        )
    elif lo >= floor:
        out["notes"].append(f"accuracy: {what}, at least the claimed {claimed['score']:g}")
    else:
        out["notes"].append(
            f"accuracy: {what} straddles the claimed {claimed['score']:g} x {1 - tolerance:g}: "
            "more problems would decide"
        )
    return out


def figure_value(summary: RunSummary, figure: str) -> float:
    if not is_figure(figure):
        raise BenchError(f"{figure!r} is not a figure of a run summary (summary.FIGURES)")
    value = float(summary.value(figure))
    if math.isnan(value):
        raise BenchError(f"the run's summary has no {figure!r}, the figure the claim names")
    return value


def judge(
    claim,
    summaries: list[RunSummary],
    changes: list[str],
    settings: JudgeSettings,
    gpus: int,
    agreed: dict | None = None,
    scored: dict | None = None,
) -> Verdict:
    """The verdict of a verify run (verdict.decide over the repeats' figures); `agreed`:
    the endpoint's agreement with --reference (agreement.measure), when one was given; `scored`:
    the task eval of a claim that states `accuracy` (task_eval.run_humaneval)."""
    blockers = []
    if changes:
        blockers.append(
            "workload scaled (" + "; ".join(changes) + "): a scaled run measures "
            "another workload, so it can neither reproduce nor refute the claim; a run of the "
            "claim's own workload would decide"
        )
    blockers += hardware_blockers(claim, settings)
    failures, figure_blockers = [], []
    for i, s in enumerate(summaries, 1):
        if s.audit and not s.audit.ok:  # the server misreports what it served: evidence
            failures.append(f"repeat {i}: token audit failed: {s.audit.message}")
        if s.selfcheck and s.selfcheck.client_bound:
            figure_blockers.append(
                f"repeat {i}: client-bound: {'; '.join(s.selfcheck.reasons)}; a load "
                "generator with room to spare would decide (bench calibrate)"
            )
        if s.errors:
            failures.append(
                f"repeat {i}: {s.errors} of {s.requests} requests failed, "
                f"first: {(s.first_error or '')[:200]}"
            )
        missed = s.failed_gates()
        if missed:
            text = ", ".join(
                f"{g['metric'][:-2].upper()} p{g['percentile']} {g['value']:.4g} s "
                f"> {g['limit']:g} s"
                for g in missed
            )
            failures.append(f"repeat {i} missed the SLO: {text}")
    tolerance = claim.tolerance if settings.tolerance is None else settings.tolerance
    spec = speculative_gate(
        claim.raw.get("speculative"), [s.speculative or Acceptance(False) for s in summaries],
        tolerance,
    )  # fmt: skip
    blockers += spec["blockers"]
    failures += spec["failures"]
    top1_min, kl_max, bound_source = agreement_bounds(claim.raw, settings.agreement_top1)
    gate = agreement_gate(agreed, top1_min, kl_max, bound_source)
    failures += gate["failures"]
    task = task_gate(scored, claim.raw.get("accuracy"), tolerance)
    failures += task["failures"]
    gate["notes"] += task["notes"]
    stated = claim.raw.get("accuracy")
    if stated and scored is None:
        gate["notes"].append(
            f"accuracy: the claim states {stated['task']} {stated['score']:g}; not checked here "
            + ("(--accuracy-problems 0)" if stated["task"].lower() in TASKS
               else f"(this project ships no {stated['task']} eval; it ships {TASKS})")
        )  # fmt: skip
    divide = gpus if claim.per == "gpu" else 1
    values = [figure_value(s, claim.figure) / divide for s in summaries]
    v = decide(
        claim.value, values, claim.higher_is_better, tolerance, blockers, failures, figure_blockers
    )
    return dataclasses.replace(
        v,
        reasons=v.reasons + tuple(spec["notes"] + gate["notes"]),
        acceptance=spec["record"],
        task_eval=None if scored is None else {
            **{k: x for k, x in scored.items() if k != "per_problem"},
            "claimed": (stated or {}).get("score"),
        },
        agreement=None if agreed is None else {
            **{k: x for k, x in agreed.items() if k != "per_prompt"},
            "top1_min": top1_min, "kl_max": kl_max, "bounds": bound_source,
        },
        claim=claim.id,
        figure=claim.figure,
        per=claim.per,
        claim_text=claim.describe(),
        scaled=bool(changes),
        changes=tuple(changes),
        repeats=len(summaries),
        gpus_under_test=gpus,
    )  # fmt: skip
