"""A validation run's prediction frozen before its measurement, the residual gates its fits must
pass, and the record of every run of one build (issue 42).

- `freeze(folder, prediction)` writes the prediction to a file of its own (never overwritten:
  the name carries the time, the file is opened exclusively) and returns its sha256 and time;
  the run's record keeps them, so the prediction it is judged against can be checked byte for
  byte against what existed before the sweep started (`verify`), and the run judged against
  exactly that prediction (`judged_as_frozen`);
- `written_before_sweep(record)`: whether the prediction's time precedes the sweep's first
  request, as far as the two stamps can order them (runs before 2026-12-06 stamped both to the
  second; from then on to the microsecond, and the first request's time is recorded).
- `gate(...)` replays a fit on its own calibration points: a fit whose RMS relative error there
  exceeds FIT_GATE_RMS has failed, and the prediction built on it says so.
- `collect(folder, commit)` gathers every run record of one commit: each run's knee error, their
  median and the worst. Runs of other commits are listed as stale, never mixed in.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import statistics
from pathlib import Path

# A fit that cannot replay its own calibration within this RMS relative error is reported as
# failed: the knee target is +-25%, and a fit off by more on its own data cannot meet it.
FIT_GATE_RMS = 0.25


def now() -> str:
    """UTC, to the microsecond: two stamps a few ms apart must still be ordered."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def freeze(folder: Path, prediction: dict) -> dict:
    """Write `prediction` to folder/prediction-<time>.json (exclusive create); its path, sha256
    and the time it was written."""
    folder.mkdir(parents=True, exist_ok=True)
    written_at = now()
    path = folder / f"prediction-{written_at.replace(':', '')}.json"
    data = json.dumps(prediction, indent=1, default=str, sort_keys=True).encode()
    with open(path, "xb") as f:  # a second run in the same second must not overwrite it
        f.write(data)
    return {
        "prediction_file": str(path),
        "prediction_sha256": hashlib.sha256(data).hexdigest(),
        "written_at": written_at,
    }


def verify(record: dict) -> bool:
    """Whether the frozen prediction file still hashes to what the run recorded."""
    pre = record["preregistration"]
    data = Path(pre["prediction_file"]).read_bytes()
    return hashlib.sha256(data).hexdigest() == pre["prediction_sha256"]


def judged_as_frozen(record: dict) -> bool:
    """Whether the prediction the run judged (record["prediction"]) is the frozen file's."""
    data = Path(record["preregistration"]["prediction_file"]).read_bytes()
    return json.loads(data) == record["prediction"]


def _stamp(text: str) -> tuple[_dt.datetime, _dt.timedelta]:
    """A stamp and its resolution: isoformat truncates, so the moment lies in [t, t + res)."""
    clock = text.split("T", 1)[1]
    res = _dt.timedelta(microseconds=1) if "." in clock else _dt.timedelta(seconds=1)
    return _dt.datetime.fromisoformat(text), res


def written_before_sweep(record: dict) -> bool | None:
    """True when the prediction was written before the sweep's first request (the recorded
    `first_request_at`, else `sweep_started_at`, taken after the prediction was frozen and before
    the first rate), False when after, None when the stamps cannot order them: both to the second
    and equal, as in every run before 2026-12-06 (those show only that it was not later)."""
    w, w_res = _stamp(record["preregistration"]["written_at"])
    f, f_res = _stamp(record.get("first_request_at") or record["sweep_started_at"])
    if w + w_res <= f:
        return True
    if w >= f + f_res:
        return False
    return None


def rms_rel(measured: list[float], fitted: list[float]) -> float:
    errs = [(f - m) / m for m, f in zip(measured, fitted, strict=True) if m]
    return math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else math.nan


def gate(name: str, measured: list[float], fitted: list[float], bound: float = FIT_GATE_RMS):
    """The residual gate of one fit replayed on its own points."""
    err = rms_rel(measured, fitted)
    return {"fit": name, "points": len(measured), "rms_rel_err": err, "bound": bound,
            "ok": math.isfinite(err) and err <= bound}  # fmt: skip


def gate_points(name: str, record: dict, bound: float = FIT_GATE_RMS) -> dict:
    """Gate for a step-line fit record whose points carry `itl_s` and `fitted_s`."""
    pts = record["points"]
    return gate(name, [p["itl_s"] for p in pts], [p["fitted_s"] for p in pts], bound)


def gate_tail(record: dict, bound: float = FIT_GATE_RMS) -> dict:
    """Gate for the first-token lag fit (pd_live.fit_tail): its best replay of the ramp's TTFT
    p50 and p95 per segment."""
    want = {m["fraction"]: m for m in record["measured"]}
    meas, fit = [], []
    for s in record["best"]["simulated"]:
        if s["fraction"] in want:
            for q in ("p50", "p95"):
                meas.append(want[s["fraction"]][q])
                fit.append(s[q])
    return gate("first-token lag (ramp TTFT p50/p95)", meas, fit, bound)


def collect(folder: Path, commit: str | None = None) -> dict:
    """Every run record (run-*.json) in `folder` of `commit` (default: the newest run's): their
    knee errors, the median and the worst (largest magnitude), and how many met the 25% target;
    records of other commits are named as stale."""
    runs, stale = [], []
    records = [(p, json.loads(p.read_text())) for p in sorted(folder.glob("run-*.json"))]
    if commit is None and records:
        commit = records[-1][1].get("commit")  # names sort by sweep start time
    for path, rec in records:
        if rec.get("commit") != commit:
            stale.append({"file": path.name, "commit": rec.get("commit")})
            continue
        checks = {
            "prediction_intact": verify(rec),
            "written_before_sweep": written_before_sweep(rec),
        }
        runs.append(rec["summary"] | {"file": path.name, **checks})
    errs = [r["knee_rate_err"] for r in runs if r["knee_rate_err"] is not None]
    finite = [e for e in errs if math.isfinite(e)]
    return {
        "commit": commit,
        "runs": runs,
        "stale_runs": stale,
        "median_knee_rate_err": statistics.median(finite) if finite else None,
        "worst_knee_rate_err": max(finite, key=abs) if finite else None,
        "met_25pct": sum(abs(e) <= 0.25 for e in finite),
        "of": len(runs),
    }
