"""`bench sessions` (bench/load/sessions.py, issue 45 item 7): multi-turn agent sessions replayed
turn by turn against the live CPU server, each turn built on the answer the server actually gave
and sent only after it arrived, with the cached fraction per turn from SGLang's own usage; the
trace format's errors and the ShareGPT import without a server."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.bench.load import sessions as S
from sglang_mx.bench.load.limits import BenchError

SAMPLE = Path(__file__).parents[3] / "benchmark" / "traces" / "agent-sessions-sample.jsonl"


def test_the_sample_trace_loads():
    todo = S.load_sessions(SAMPLE)
    assert [len(s.turns) for s in todo] == [3, 3, 2]
    assert todo[0].turns[1].messages[0]["role"] == "tool" and todo[1].start_s == 0.3


@pytest.mark.parametrize(("line", "message"), [
    ("{", "not JSON"),
    ('{"turns": []}', "non-empty list of turns"),
    ('{"turns": [{"messages": [{"role": "system", "content": "x"}], "max_tokens": 4}]}',
     "user / tool messages"),
    ('{"turns": [{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}]}',
     "max_tokens must be an integer >= 1"),
    ('{"turns": [{"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, '
     '"think_s": -1}]}', "think_s must be a number >= 0"),
])  # fmt: skip
def test_bad_session_lines_are_refused_naming_the_line(tmp_path, line, message):
    path = tmp_path / "s.jsonl"
    path.write_text('{"turns": [{"messages": [{"role": "user", "content": "ok"}], '
                    '"max_tokens": 2}]}\n' + line + "\n")  # fmt: skip
    with pytest.raises(BenchError, match=message) as err:
        S.load_sessions(path)
    assert f"{path}:2" in str(err.value)


def test_sharegpt_conversations_become_sessions(tmp_path):
    data = [
        {"id": "a", "conversations": [
            {"from": "system", "value": "be brief"},
            {"from": "human", "value": "hi"}, {"from": "gpt", "value": "x" * 40},
            {"from": "observation", "value": "{\"temp\": 21}"}, {"from": "gpt", "value": "warm"},
            {"from": "human", "value": "and tomorrow?"},
        ]},
        {"id": "b", "conversations": [{"from": "gpt", "value": "no user turn"}]},
    ]  # fmt: skip
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    (s,) = S.from_sharegpt(path, gap_s=2.0, default_max_tokens=7)
    assert (s.session, s.system, s.start_s) == ("a", "be brief", 0.0)
    assert [t.max_tokens for t in s.turns] == [10, 1, 7]
    assert s.turns[1].messages == ({"role": "tool", "content": '{"temp": 21}'},)
    none = tmp_path / "none.json"
    none.write_text(json.dumps([data[1]]))
    with pytest.raises(BenchError, match="no ShareGPT conversation"):
        S.from_sharegpt(none)


@pytest.mark.server
def test_sessions_replay_on_the_answers_given_with_the_cache_per_turn(live_server, tmp_path):
    out = tmp_path / "sessions.json"
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "sessions", str(SAMPLE), "--url", live_server,
                              "--ignore-eos", "-o", str(out)])  # fmt: skip
    assert args.func(args) == 0
    got = json.loads(out.read_text())
    turns = got["turns"]
    assert len(turns) == 8 and not any(t["error"] for t in turns)
    spec = {s.session: s for s in S.load_sessions(SAMPLE)}
    for name, s in spec.items():
        mine = sorted((t for t in turns if t["session"] == name), key=lambda t: t["turn"])
        assert [t["turn"] for t in mine] == list(range(1, len(s.turns) + 1))
        for prev, cur, turn in zip(mine, mine[1:], s.turns, strict=False):
            assert prev["completion_tokens"] == turn.max_tokens  # --ignore-eos: all of it
            # sent only after the previous answer arrived and its think time passed
            assert cur["sent_at_s"] >= prev["sent_at_s"] + prev["e2e_s"] + turn.think_s - 0.01
            # built on the answer given: the previous prompt and answer are in this prompt
            assert cur["prompt_tokens"] > prev["prompt_tokens"] + prev["completion_tokens"]
            # and the server found the previous turn's prompt in its cache
            assert cur["cached_tokens"] >= 0.9 * prev["prompt_tokens"], (name, prev, cur)
    rows = {r["turn"]: r for r in got["summary"]["turns"]}
    assert rows[2]["cached_fraction"] > 0.2 and rows[3]["cached_fraction"] > 0.2, rows
    assert got["summary"]["failed"] == 0
