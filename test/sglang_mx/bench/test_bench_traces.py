"""Trace readers on the sample files in benchmark/traces/ (written to each format's schema):
detection, lengths, Mooncake block sharing and ledger cached counts as expected cached tokens,
time scaling, sampling, the cap, a provider ledger exported and read back, replays through the
CLI against the fake server (its radix-cache stand-in measures the sharing), and bad rows
refused in one line naming the file, line and field."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from bench_fake_openai import FakeCache, make_app
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.bench.load.traceio import TraceOptions, detect, load_trace
from sglang_mx.bench.load.traces_ledger import export_ledger
from sglang_mx.bench.load.traces_public import TraceFormatError
from sglang_mx_lab.testing.inprocess import serve_in_thread

SAMPLES = Path(__file__).parents[3] / "benchmark" / "traces"
FILES = {"mooncake": "sample-mooncake.jsonl", "azure": "sample-azure.csv",
         "burstgpt": "sample-burstgpt.csv", "ledger": "sample-ledger.jsonl"}  # fmt: skip


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_detected_and_lengths_kept(fmt):
    path = SAMPLES / FILES[fmt]
    assert detect(path) == fmt
    trace = load_trace(path)
    lines = [x for x in path.read_text().splitlines()[1:] if x.strip()]
    if fmt == "mooncake":
        lines = path.read_text().splitlines()
        rows = [json.loads(x) for x in lines]
        assert [r.input_len for r in trace.requests] == [r["input_length"] for r in rows]
    assert len(trace.requests) + trace.source["skipped"] == len(lines)
    assert trace.spec.arrival == "trace" and trace.requests[0].arrival_s == 0.0


def test_mooncake_blocks_share_exactly():
    rows = [json.loads(x) for x in (SAMPLES / FILES["mooncake"]).read_text().splitlines()]
    trace = load_trace(SAMPLES / FILES["mooncake"])
    seen: set = set()
    for row, req in zip(rows, trace.requests, strict=True):
        # hand rule: the leading hash ids seen before, 512 tokens each, are cached
        n = 0
        for i in range(len(row["hash_ids"])):
            if tuple(row["hash_ids"][: i + 1]) not in seen:
                break
            n += 1
        assert req.expected_cached == min(512 * n, row["input_length"] - 1)
        seen.update(tuple(row["hash_ids"][: i + 1]) for i in range(len(row["hash_ids"])))
        assert req.segments[0][0] == f"mc{row['hash_ids'][0]}"
    assert trace.predicted_hit_rate > 0.5


def test_ledger_cached_counts_are_rebuilt_and_primed(tmp_path):
    from sglang_mx.provider.ledger import Ledger

    ledger = Ledger(tmp_path / "p.db")
    for i, (prompt, cached) in enumerate([(300, 0), (420, 300), (500, 420)]):
        ledger.start(f"r{i}", "key1", "m", prompt)
        ledger.finish(f"r{i}", "ok", prompt, 6, cached, 0.0)
    ledger.start("bad", "key1", "m", 10)
    ledger.finish("bad", "error", 10, 0, 0, 0.0, "boom")
    ledger.db.close()
    out = tmp_path / "l.jsonl"
    assert export_ledger(tmp_path / "p.db", out) == 3  # errors are not replayed
    assert "key1" not in out.read_text()  # key ids are hashed
    trace = load_trace(out)
    assert [r.expected_cached for r in trace.requests] == [0, 300, 420]
    assert [r.input_len for r in trace.requests] == [300, 420, 500]
    assert len(trace.prime) == 1 and trace.prime[0][1] == 420


def test_time_scale_sample_and_cap():
    path = SAMPLES / FILES["azure"]
    full = load_trace(path)
    fast = load_trace(path, opts=TraceOptions(time_scale=0.5))
    assert fast.requests[-1].arrival_s == pytest.approx(full.requests[-1].arrival_s / 2)
    capped = load_trace(path, opts=TraceOptions(max_requests=3))
    assert [r.input_len for r in capped.requests] == [r.input_len for r in full.requests[:3]]
    half = load_trace(path, opts=TraceOptions(sample=0.5, seed=3))
    assert 0 < len(half.requests) < len(full.requests)
    ids = [r.input_len for r in full.requests]
    assert all(r.input_len in ids for r in half.requests)


@pytest.mark.parametrize("fmt", ["azure", "burstgpt", "ledger", "mooncake"])
def test_replay_through_cli(tmp_path, tiny_tokenizer, fmt):
    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    with serve_in_thread(make_app(FakeCache(), metrics=True)) as url:
        argv = ["bench", "run", "--url", url, "--tokenizer", str(tmp_path), "--trace",
                str(SAMPLES / FILES[fmt]), "--trace-format", fmt, "--trace-time-scale", "0.1",
                "--warmup", "0", "--no-progress", "-o", str(tmp_path / "out")]  # fmt: skip
        assert _main(argv) == 0
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    s = result["sweep"]["points"][0]["summary"]
    assert s["errors"] == 0 and s["audit"]["ok"]
    # the fake caches every prompt it saw, as an ideal radix cache would; different segments
    # share a first token by chance now and then (the tiny tokenizer has few words)
    assert abs(s["cached_tokens"] - s["expected_cached_tokens"]) <= 4 * s["completed"]
    assert (s["expected_cached_tokens"] > 100) == (fmt in ("ledger", "mooncake"))


def test_bad_rows_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
                   '{"timestamp": 5, "output_length": 2, "hash_ids": [1]}\n')  # fmt: skip
    with pytest.raises(TraceFormatError, match=r"bad.jsonl:2: mooncake row has no 'input_length'"):
        load_trace(bad)
    csv = tmp_path / "bad.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,2\n")
    argv = ["bench", "run", "--url", "http://127.0.0.1:9", "--tokenizer", str(tmp_path),
            "--trace", str(csv)]  # fmt: skip
    assert _main(argv) == 2
    err = capsys.readouterr().err
    assert "bad.csv:2: TIMESTAMP 'yesterday'" in err and "Traceback" not in err
    (tmp_path / "x.txt").write_text("hello\n")
    with pytest.raises(TraceFormatError, match="--trace-format"):
        load_trace(tmp_path / "x.txt")
