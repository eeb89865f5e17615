"""`sglang-mx bench calibrate --with-sglang TOKENIZER_DIR`: SGLang's own benchmark client
(`python -m sglang.benchmark.serving`) stepped through the same target rates as ours against the
same null server in the same run, one of its steps right after each of ours, so the two clients'
ceilings come from one box at one time.

SGLang's client reports no schedule lag, so both are judged here by what they deliver: a step
passes when every request succeeded and the delivered rate is at least calibrate.DELIVERED of
the target (ours must also meet its lag limits, as in `calibrate`). Its arrivals are Poisson
(ours fixed-rate), so each of its steps sends at least MIN_REQUESTS requests: the delivered rate
of a Poisson schedule of n arrivals scatters by about 1 / sqrt(n) (5% at 400)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sglang_mx.bench.load.limits import BenchError
from sglang_mx.bench.load.sglang_bench import read_sglang_result, sglang_bench_command, sglang_env
from sglang_mx.bench.run import calibrate

MIN_REQUESTS = 400
STEP_TIMEOUT_S = 600.0


def prompt_file(workdir: Path, tokenizer_dir: str, n: int) -> Path:
    """A prompt file for a step of `n` requests: SGLang's random dataset sends at most one
    request per row of the file (a 64-row file capped every step at 64 requests)."""
    from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer
    from sglang_mx.bench.load.sglang_bench import write_dataset

    path = workdir / f"calibrate-prompts-{n}.json"
    if not path.exists():
        write_dataset(SegmentTokens(load_tokenizer(tokenizer_dir)), path, n, calibrate.PROMPT_LEN)
    return path


def sglang_step(
    url: str, tokenizer_dir: str, rate: float, output_len: int, workdir: Path, step_s: float
) -> dict:
    """One of SGLang's client's steps: `rate` req/s (Poisson) of PROMPT_LEN in / output_len out."""
    n = max(MIN_REQUESTS, int(rate * step_s))
    dataset = prompt_file(workdir, tokenizer_dir, n)
    out = workdir / f"sglang-{rate:g}.jsonl"
    out.unlink(missing_ok=True)
    cmd = sglang_bench_command(url, tokenizer_dir, dataset, calibrate.PROMPT_LEN, output_len,
                               n, out, rate=rate)  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=sglang_env(), cwd=workdir,
                          timeout=STEP_TIMEOUT_S)  # fmt: skip
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise BenchError(f"SGLang's benchmark failed at {rate:g} req/s: {' | '.join(tail)}")
    r = read_sglang_result(out)
    step = {
        "target_req_s": rate,
        "requests": n,
        "errors": n - r["completed"],
        "req_s": r["request_throughput"],
        "tok_s": r["output_tok_s"],
    }
    step["passed"] = step["errors"] == 0 and step["req_s"] >= calibrate.DELIVERED * rate * 0.999
    return step


def ceiling(steps: list[dict]) -> dict | None:
    """The last step that passed before the first that did not (None: the first failed)."""
    best = None
    for step in steps:
        if not step["passed"]:
            break
        best = {"req_s": step["req_s"], "tok_s": step["tok_s"]}
    return best


def side_by_side(
    url: str, tokenizer_dir: str, rates: list[float], output_len: int, step_s: float, workdir: Path
) -> dict:
    """Ours then SGLang's at every rate (no early stop, so both columns are full)."""
    workdir.mkdir(parents=True, exist_ok=True)
    ours, theirs = [], []
    for rate in rates:
        step = calibrate.run_step(url, rate, output_len, step_s)
        step["passed"] = calibrate.passed(step)
        ours.append(step)
        theirs.append(sglang_step(url, tokenizer_dir, rate, output_len, workdir, step_s))
        print(f"  {rate:8.0f} req/s: ours {ours[-1]['req_s']:8.1f}, SGLang's "
              f"{theirs[-1]['req_s']:8.1f}", file=sys.stderr)  # fmt: skip
    return {
        "steps": ours,
        "ceiling": ceiling(ours),
        "sglang_steps": theirs,
        "sglang_ceiling": ceiling(theirs),
        "sglang_min_requests": MIN_REQUESTS,
    }


def table(out: dict) -> str:
    """The side-by-side table, markdown."""
    lines = [
        "| target req/s | ours: delivered req/s | streamed tok/s | lag p50 / p99 ms | client CPU "
        "| SGLang's: delivered req/s | streamed tok/s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for a, b in zip(out["steps"], out["sglang_steps"], strict=True):
        lines.append(
            f"| {a['target_req_s']:g} | {a['req_s']:.1f}{'' if a['passed'] else ' (x)'} "
            f"| {a['tok_s']:,.0f} | {a['lag_p50_s'] * 1e3:.2f} / {a['lag_p99_s'] * 1e3:.1f} "
            f"| {a['client_cpu']:.0%} | {b['req_s']:.1f}{'' if b['passed'] else ' (x)'} "
            f"| {b['tok_s']:,.0f} |"
        )
    return "\n".join(lines)
