"""`sglang-mx bench gen | run --trace | report | compare` and `roofline` through argparse."""

from __future__ import annotations

import argparse
import json

from bench_fake_openai import FakeCache, make_app
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.capacity import cli as roofline_cli
from sglang_mx_lab.testing.inprocess import serve_in_thread


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    bench_cli.register(sub)
    roofline_cli.register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def test_gen_run_report_compare(tmp_path, tiny_tokenizer, capsys):
    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    trace = tmp_path / "t.jsonl"
    common = ["--workload", "cpu-2k-32-60", "--num-requests", "6", "--output-len", "4"]
    assert _main(["bench", "gen", *common, "--arrival", "concurrency", "-o", str(trace)]) == 0
    assert "designed hit rate 0.6" in capsys.readouterr().out
    outs = []
    with serve_in_thread(make_app(FakeCache())) as url:
        for name in ("a", "b"):
            out = tmp_path / name
            run = ["bench", "run", "--url", url, "--tokenizer", str(tmp_path), "--trace"]
            run += [str(trace), "--hardware", "B200", "--no-progress", "-o", str(out)]
            assert _main(run) == 0
            outs.append(out)
    result = json.loads((outs[0] / "result.json").read_text())
    assert result["sweep"]["kind"] == "concurrency" and result["gpus"] == 8
    assert abs(result["sweep"]["points"][0]["summary"]["hit_rate"] - 0.6) < 0.01
    assert result["cost"]["price_per_gpu_hour"] == 1.95
    assert "8x B200" in (outs[0] / "report.md").read_text()
    (outs[0] / "report.md").unlink()
    assert _main(["bench", "report", str(outs[0] / "result.json")]) == 0
    assert (outs[0] / "report.md").exists()
    capsys.readouterr()
    table = tmp_path / "cmp.md"
    ab = [str(outs[0] / "result.json"), str(outs[1] / "result.json")]
    assert _main(["bench", "compare", *ab, "--labels", "x,y", "-o", str(table)]) == 0
    assert "| figure | x | y | y / x |" in table.read_text()
    assert "| cost.usd_per_m_output |" in capsys.readouterr().out


def test_roofline_cli_prints_measured_over_limit(capsys):
    assert _main(["roofline", "--layout", "tp8", "--measured", "2626", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["measured_over_limit"] == 2626 / row["output_tok_s"]
    assert _main(["roofline", "--hardware", "B200", "--layout", "tp8,tp2xdp4"]) == 0
    out = capsys.readouterr().out
    assert "tp2xdp4" in out and "kv-capacity" in out


def test_run_refuses_unknown_hardware_before_sending(tmp_path, tiny_tokenizer, capsys):
    """An unknown --hardware is refused in one line before the server sees a request (it once
    ended a 20-minute run after its last token)."""
    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    cache = FakeCache()
    with serve_in_thread(make_app(cache)) as url:
        run = ["bench", "run", "--url", url, "--tokenizer", str(tmp_path), "--workload",
               "cpu-2k-32-60", "--num-requests", "2", "--output-len", "2", "--hardware", "NOPE",
               "--no-progress", "-o", str(tmp_path / "out")]  # fmt: skip
        assert _main(run) == 2
    assert "unknown hardware 'NOPE'" in capsys.readouterr().err
    assert cache.prompts == [] and cache.flushes == 0
    assert not (tmp_path / "out" / "result.json").exists()
