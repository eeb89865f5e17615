"""preregister.py: a frozen prediction cannot be overwritten and is checked by hash; fit gates
fail a fit that cannot replay its own points; collect keeps one commit's runs, median and worst."""

from __future__ import annotations

import json
import math

import pytest
from sglang_mx_lab.planner import preregister as P


def test_freeze_writes_once_and_verify_sees_an_edit(tmp_path):
    pre = P.freeze(tmp_path, {"knee": 5.0})
    rec = {"preregistration": pre}
    assert P.verify(rec)
    path = tmp_path / pre["prediction_file"].split("/")[-1]
    with pytest.raises(FileExistsError):
        with open(path, "xb") as f:  # the same name cannot be created again
            f.write(b"{}")
    path.write_text(json.dumps({"knee": 9.0}))  # rewritten after the fact
    assert not P.verify(rec)


def test_gates_pass_a_close_fit_and_fail_a_far_one():
    assert P.gate("close", [1.0, 2.0, 4.0], [1.1, 1.9, 4.2])["ok"]
    far = P.gate("far", [0.36, 0.39, 0.46], [0.66, 0.65, 1.15])  # issue 42's replay: 1.8-3.5x
    assert not far["ok"] and far["rms_rel_err"] > 0.25
    assert not P.gate("empty", [], [])["ok"]
    tail = {"measured": [{"fraction": 0.2, "p50": 0.2, "p95": 0.36}],
            "best": {"simulated": [{"fraction": 0.2, "p50": 0.21, "p95": 0.66}]}}  # fmt: skip
    assert not P.gate_tail(tail)["ok"]


def _run(folder, name, commit, err, tmp):
    pre = P.freeze(tmp / name, {"commit": commit})
    rec = {"commit": commit, "preregistration": pre, "first_request_at": P.now(),
           "summary": {"knee_rate_err": err, "sweep_started_at": name}}  # fmt: skip
    (folder / f"run-{name}.json").write_text(json.dumps(rec))


def test_collect_reports_every_run_of_one_commit(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for i, err in enumerate([0.1, -0.4, 0.2, math.nan]):
        _run(runs, f"a{i}", "abc", err, tmp_path)
    _run(runs, "old", "def", 0.0, tmp_path)
    got = P.collect(runs, "abc")
    assert P.collect(runs)["commit"] == "def"  # the newest run's ("old" sorts last)
    assert got["of"] == 4 and [s["commit"] for s in got["stale_runs"]] == ["def"]
    assert got["median_knee_rate_err"] == pytest.approx(0.1)
    assert got["worst_knee_rate_err"] == pytest.approx(-0.4) and got["met_25pct"] == 2
    assert all(r["prediction_intact"] for r in got["runs"])
    assert all(r["written_before_sweep"] for r in got["runs"])


def test_written_before_sweep_orders_only_what_the_stamps_can():
    def rec(written: str, first: str, key: str = "first_request_at") -> dict:
        return {"preregistration": {"written_at": written}, key: first}

    ms = "2026-12-06T06:00:00.{:06d}+00:00"
    assert P.written_before_sweep(rec(ms.format(100), ms.format(101))) is True
    assert P.written_before_sweep(rec(ms.format(101), ms.format(100))) is False
    assert P.written_before_sweep(rec(ms.format(100), ms.format(100))) is None
    # stamped to the second (the runs of 2026-12-03): equal seconds cannot be ordered
    sec = "2026-12-03T18:29:{:02d}+00:00"
    assert P.written_before_sweep(rec(sec.format(33), sec.format(33), "sweep_started_at")) is None
    assert P.written_before_sweep(rec(sec.format(33), sec.format(34), "sweep_started_at")) is True
    assert P.written_before_sweep(rec(sec.format(34), sec.format(33), "sweep_started_at")) is False
    # a second-stamp against a microsecond one: 18:29:33 is any moment of that second
    assert P.written_before_sweep(rec(sec.format(33), "2026-12-03T18:29:33.900000+00:00")) is None
    assert "." in P.now().split("T")[1]  # new stamps carry microseconds
