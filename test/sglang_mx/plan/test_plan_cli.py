"""`sglang-mx plan` end to end on a small workload, its input errors and the interpolated knee
(the calibration fit: test_plan_step_fit.py)."""

from __future__ import annotations

import json
import math

import pytest
from sglang_mx.cli.main import main
from sglang_mx.plan.knee import knee_rate


def test_plan_cli_writes_report(tmp_path, capsys):
    rc = main(
        [
            "plan",
            "--model",
            "glm-5.2",
            "--hardware",
            "MI355X",
            "--gpus",
            "8",
            "--layout",
            "tp8,tp8-dpattn8",
            "--workload",
            "4k-0.1k-60",
            "--rates",
            "1,4",
            "--num-requests",
            "12",
            "-o",
            str(tmp_path),
            "--no-plots",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "## tp8" in out and "## tp8-dpattn8" in out and "roofline" in out
    result = json.loads((tmp_path / "plan.json").read_text())
    assert [s["layout"] for s in result["sweeps"]] == ["tp8", "tp8-dpattn8"]
    point = result["sweeps"][0]["points"][0]["summary"]
    assert point["completed"] == 12 and point["cost"]["usd_per_m_output"] > 0
    assert result["efficiency_sources"]["moe_mem"].startswith("assumption")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--layout", "tp4", "--rates", "1"], "uses 4 GPUs"),
        (["--layout", "tp9x", "--rates", "1"], "bad layout"),
        (["--rates", "1,-2"], "must be > 0"),
        (["--workload", "huge", "--rates", "1"], "IN-OUT-HIT"),
        ([], "exactly one of --rates or --concurrencies"),
        (["--efficiency", "magic", "--rates", "1"], "unknown efficiency profile"),
    ],
)
def test_plan_cli_bad_input_names_the_problem(argv, message, capsys):
    assert main(["plan", "--gpus", "8", *argv]) == 2
    assert message in capsys.readouterr().err


def _pt(x, p95, errors=0):
    return {"x": x, "summary": {"errors": errors, "ttft_s": {"p95": p95}}}


def test_knee_rate_interpolates_the_crossing():
    pts = [_pt(1, 0.5), _pt(2, 1.0), _pt(3, 3.0)]
    assert knee_rate(pts, 2.0) == pytest.approx(2.5)
    assert knee_rate(pts, 10.0) == 3.0  # never crossed: the last rate
    assert math.isnan(knee_rate([_pt(1, 5.0)], 2.0))
    assert knee_rate([_pt(1, 0.5), _pt(2, 0.6, errors=1)], 2.0) == 1.0
