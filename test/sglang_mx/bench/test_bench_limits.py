"""The bench reads the server's context length and vocabulary before it runs: a workload that
cannot fit is refused in one line (both numbers, the flags that scale it), --fit-context scales
it in; a request that fails mid-run (HTTP 400) is counted and reported, never a traceback.
Against the in-process fake OpenAI server (bench_fake_openai.py), which answers over-long prompts
with SGLang's 400."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from bench_fake_openai import FakeCache, make_app
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.bench.load.limits import (
    ServerLimits,
    WorkloadDoesNotFit,
    check_fits,
    fit_to_context,
    limits_from,
)
from sglang_mx.bench.load.prompts import SegmentTokens, materialize
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.capacity.workload import get_preset
from sglang_mx.measure.tracegen import generate
from sglang_mx_lab.testing.inprocess import serve_in_thread

GLM5_CONFIGS = [
    Path(__file__).parents[3] / f"python/sglang_mx/assets/tiny-glm5-{kind}/config.json"
    for kind in ("bf16", "quark")
]


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture()
def tokenizer_dir(tmp_path, tiny_tokenizer) -> str:
    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    return str(tmp_path)


def _run_argv(url: str, tokenizer_dir: str, out: Path, *extra: str) -> list[str]:
    return ["bench", "run", "--url", url, "--tokenizer", tokenizer_dir, "--no-progress",
            "--warmup", "0", "-o", str(out), *extra]  # fmt: skip


def test_limits_from_each_kind_of_server():
    # SGLang / vLLM: /v1/models max_model_len
    sglang = limits_from(None, {"data": [{"id": "m", "max_model_len": 512}]})
    assert (sglang.context_length, sglang.context_source) == (512, "/v1/models max_model_len")
    # SGLang with the plugin: /model_info says both, and the smaller context wins
    both = limits_from(
        {"context_length": 400, "vocab_size": 2048}, {"data": [{"max_model_len": 512}]}
    )
    assert (both.context_length, both.vocab_size) == (400, 2048)
    assert both.context_source == "model_info context_length"
    # our provider: legacy flat document, and the 2.4 schema's input modality
    legacy = limits_from(None, {"data": [{"id": "a", "context_length": 8192}]})
    assert legacy.context_length == 8192
    v24 = {"input_modalities": [{"supported_inputs": {"max_context_length": {"value": 300}}}]}
    assert limits_from(None, {"data": [{"id": "b", **v24}]}).context_length == 300
    # the requested model's entry, not another one's
    two = {"data": [{"id": "x", "context_length": 100}, {"id": "y", "context_length": 900}]}
    assert limits_from(None, two, "y").context_length == 900
    assert limits_from({"context_length": True}, {"data": []}) == ServerLimits()


def test_over_long_workload_refused_in_one_line(tokenizer_dir, tmp_path, capsys):
    app = make_app(FakeCache(), context_length=512)
    with serve_in_thread(app) as url:
        argv = _run_argv(url, tokenizer_dir, tmp_path / "out", "--workload", "production-20k-1k-60")
        assert _main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "20000 prompt + 1000 output = 21000 tokens" in err
    assert "context is 512 tokens" in err and "--input-len" in err and "--fit-context" in err
    assert app.state.completions["n"] == 0  # refused before anything was sent
    assert not (tmp_path / "out").exists()


def test_tokenizer_beyond_server_vocabulary_refused(tokenizer_dir, tmp_path, capsys):
    with serve_in_thread(make_app(FakeCache(), vocab_size=64)) as url:
        argv = _run_argv(url, tokenizer_dir, tmp_path / "out", "--num-requests", "4")
        assert _main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "vocabulary has 64 tokens" in err, err


def test_fit_context_scales_production_shape_in(tokenizer_dir, tmp_path):
    out = tmp_path / "out"
    with serve_in_thread(make_app(FakeCache(), context_length=512)) as url:
        argv = _run_argv(url, tokenizer_dir, out, "--workload", "production-20k-1k-60",
                         "--fit-context", "--num-requests", "8", "--rate", "50")  # fmt: skip
        assert _main(argv) == 0
    result = json.loads((out / "result.json").read_text())
    w = result["workload"]
    n_in, n_out = w["input_len"]["value"], w["output_len"]["value"]
    assert n_in < 512 and n_in + n_out <= 512 and n_in + n_out >= 480
    assert n_in / n_out == pytest.approx(20, rel=0.05) and w["hit_rate"] == 0.6
    s = result["sweep"]["points"][0]["summary"]
    assert s["errors"] == 0 and abs(s["hit_rate"] - 0.6) < 0.01
    assert result["sweep"]["points"][0]["meta"]["limits"]["context_length"] == 512


def test_http_400_mid_run_counted_and_reported(tokenizer_dir, tmp_path, capsys):
    # the server enforces a 300-token context without saying so: the long requests get 400s
    out = tmp_path / "out"
    app = make_app(FakeCache(), context_length=300, advertise=False)
    with serve_in_thread(app) as url:
        argv = _run_argv(url, tokenizer_dir, out, "--input-len", "uniform:100:400",
                         "--output-len", "4", "--num-requests", "12", "--rate", "50")  # fmt: skip
        assert _main(argv) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    s = json.loads((out / "result.json").read_text())["sweep"]["points"][0]["summary"]
    assert 0 < s["errors"] < 12 and s["completed"] == 12 - s["errors"]
    assert s["first_error"].startswith("HTTP 400") and "context length (300" in s["first_error"]
    assert (
        f"Failed requests at rate (req/s) 50.0: {s['errors']} of 12"
        in (out / "report.md").read_text()
    )
    assert captured.err.strip().splitlines()[-1].startswith(f"{s['errors']} of 12 requests failed")


def test_failed_priming_is_reported_not_raised(tiny_tokenizer):
    # every shared prefix is longer than the unadvertised context: priming and requests fail
    tokens = SegmentTokens(tiny_tokenizer)
    spec = get_preset("cpu-2k-32-60").with_overrides(num_requests=4, rate=50.0)
    trace = generate(spec)
    with serve_in_thread(make_app(FakeCache(), context_length=256, advertise=False)) as url:
        cfg = RunConfig(base_url=url, progress=False, warmup=0)
        res = run_trace(trace, materialize(trace, tokens), cfg, tokens)
    assert res.summary.errors == 4 and res.summary.first_error.startswith("HTTP 400")
    assert len(res.meta["prime_errors"]) == len(trace.prime) > 0
    assert any("priming requests failed" in w for w in res.warnings)


def test_runner_refuses_before_sending(tiny_tokenizer):
    tokens = SegmentTokens(tiny_tokenizer)
    trace = generate(get_preset("cpu-2k-32-60").with_overrides(num_requests=4))
    app = make_app(FakeCache(), context_length=1024)
    with serve_in_thread(app) as url:
        with pytest.raises(WorkloadDoesNotFit, match="context is 1024 tokens"):
            run_trace(trace, materialize(trace, tokens), RunConfig(base_url=url), tokens)
    assert app.state.completions["n"] == 0


@pytest.mark.parametrize("config", GLM5_CONFIGS, ids=["bf16", "quark"])
def test_production_cpu_preset_keeps_shape_and_fits_bundled_glm5(config):
    prod, cpu = get_preset("production-20k-1k-60"), get_preset("production-480-24-60")
    assert cpu.input_len.value / cpu.output_len.value == (
        prod.input_len.value / prod.output_len.value
    )
    assert (cpu.hit_rate, cpu.prefix_groups, cpu.rate, cpu.turns) == (
        prod.hit_rate, prod.prefix_groups, prod.rate, prod.turns
    )  # fmt: skip
    ctx = json.loads(config.read_text())["max_position_embeddings"]
    trace = generate(cpu)
    check_fits(trace, ServerLimits(context_length=ctx, context_source="config"))
    assert abs(trace.predicted_hit_rate - 0.6) < 0.005
    # and the production preset itself, scaled by --fit-context, lands on the same shape
    fitted = fit_to_context(prod, ctx)
    assert fitted.input_len.value / fitted.output_len.value == pytest.approx(20, rel=0.05)
