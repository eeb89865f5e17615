"""The verify walk (scripts/verify_walk.py) counts what its docstring says: a planted walk gives
the stops and returns worked out by hand at both levels; a traced verb sees only the verb's own
calls (no import-time work, no resumed coroutine counted twice); and the real `bench verify`
against the bench tests' fake server stays within issue 60's target (<= 20 stops, <= 8 returns
between rooms)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import verify_walk as vw  # noqa: E402

A, B = "sglang_mx.bench.cli.verbs", "sglang_mx.bench.run.runner"
C, D = "sglang_mx.bench.run.audit", "sglang_mx.measure.summary"


def test_a_planted_walk_counts_by_hand():
    walk = vw.Walk(
        entries=[
            ("<cli>", A, "cmd"),  # stop 1 (module and room)
            (A, B, "run"),  # stop 2
            (B, C, "audit"),  # stop 3 at module level; inside bench.run: no room move
            (C, D, "to_dict"),  # stop 4
            (B, D, "summarize"),  # stop 5 (a new edge into an entered module: a return)
            (D, B, "callback"),  # stop 6: back into runner, a return
            (A, B, "run_again"),  # the edge A -> B was walked: no stop
        ]
    )
    stops, returns = walk.stops(lambda m: m)
    assert len(stops) == 6 and returns == 2
    rooms, room_returns = walk.stops(vw.room)
    # <cli> -> bench.cli, bench.cli -> bench.run, bench.run -> measure, measure -> bench.run
    assert rooms == [
        ("<cli>", "sglang_mx.bench.cli"),
        ("sglang_mx.bench.cli", "sglang_mx.bench.run"),
        ("sglang_mx.bench.run", "sglang_mx.measure"),
        ("sglang_mx.measure", "sglang_mx.bench.run"),
    ]
    assert room_returns == 1
    assert vw.room("sglang_mx.machine_info") == "sglang_mx.machine_info"


def test_a_traced_verb_sees_its_own_calls_only(tmp_path):
    """`bench report` over a committed result: the walk starts at the verb, reaches the report
    room, and holds no import-time entry (the report modules import lazily inside the verb)."""
    result = ROOT / "docs" / "results" / "cpu-bundled-mxfp4" / "result.json"
    status, walk = vw.walk_verb(["bench", "report", str(result), "-o", str(tmp_path)])
    assert status == 0 and (tmp_path / "report.html").exists()
    assert walk.entries[0][0] == "<cli>"
    modules = {m for _, m, _ in walk.entries}
    assert "sglang_mx.bench.report.html_page" in modules
    assert all(f != "<module>" for _, _, f in walk.entries)
    # check_figures runs at markdown's import: import-time work, never a stop
    assert not any(f == "check_figures" for _, _, f in walk.entries)


def test_the_verify_walk_stays_within_the_target(capsys):
    assert vw.main(["--quiet", "--max-stops", "20", "--max-returns", "8"]) == 0
    out = capsys.readouterr().out
    assert "rooms: stops" in out and "modules: stops" in out
