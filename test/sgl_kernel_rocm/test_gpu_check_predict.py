"""Predict, then measure: the GPU check prints the cost model's prediction per timed row before
it runs and measured / predicted (with the median) after (benchmark/gpu_check/predict.py). Pure
Python over the committed predictions; no GPU, no compile."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark" / "gpu_check"))

import plan as P  # noqa: E402
import predict as PR  # noqa: E402


@pytest.fixture(scope="module")
def data():
    d = PR.load("sm90")
    assert d is not None, "benchmark/gpu_check/predicted-sm90.json is missing"
    return d


def test_every_timed_case_of_the_plan_has_a_prediction(data, capsys):
    timed = [c for c in P.build_plan() if c.kind in PR.TIMED]
    assert timed and all(c.name in data["rows"] for c in timed)
    for c in timed:
        units = data["rows"][c.name]
        assert set(units) == ({"moe.gate_up", "moe.down"} if c.kind.startswith("moe")
                              else {f"attn.{c.kind}"})  # fmt: skip
        assert all(u["us"] > 0 and u["bound"] for u in units.values())
    PR.print_plan(timed)
    out = capsys.readouterr().out
    assert "predicted (sm90" in out and timed[0].name in out


def _rows(data, scales):
    """Timed rows measured at `scale` x the prediction, one scale per case."""
    timed = [c for c in P.build_plan() if c.kind in ("moe", "mla")][: len(scales)]
    rows = []
    for c, scale in zip(timed, scales, strict=True):
        units = data["rows"][c.name]
        row = {"case": c.name, "kind": c.kind, "status": "ok"}
        if c.kind == "moe":
            row |= {"gate_up_us": units["moe.gate_up"]["us"] * scale,
                    "down_us": units["moe.down"]["us"] * scale}  # fmt: skip
        else:
            row["us"] = units["attn.mla"]["us"] * scale
        rows.append(row)
    return rows + [{"case": "check_moe:x", "kind": "check_moe", "status": "ok"}]


@pytest.mark.parametrize(
    ("scales", "median", "within"),
    [((1.2,) * 6, 0.2, True), ((0.5, 2.0, 2.0, 2.0, 2.0, 2.0), 1.0, False)],
)
def test_measured_over_predicted_and_its_median(data, scales, median, within):
    rows = _rows(data, scales)
    summary = PR.compare(rows, "sm90")
    got = [u["measured_over_predicted"] for r in rows for u in r.get("predicted", {}).values()]
    assert summary["n"] == len(got) >= 6 and "predicted" not in rows[-1]
    assert {round(x, 2) for x in got} == {round(x, 2) for x in scales}
    assert summary["median_abs_rel_err"] == pytest.approx(median, abs=1e-3)
    assert summary["within_35pct"] is within


def test_no_predictions_is_said_not_hidden(capsys):
    assert PR.compare([{"case": "moe:x", "status": "ok", "us": 1.0}], "gfx999") == {
        "arch": "gfx999", "predictions": None}  # fmt: skip
    assert "no predictions for gfx999" in capsys.readouterr().out
