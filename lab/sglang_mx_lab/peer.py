"""Our runner beside SGLang's own benchmark (`python -m sglang.benchmark.serving`) on one server.

Both clients run the same workload (fixed input and output lengths, unique prompts, a closed
loop of `concurrency` requests in flight: SGLang's `--request-rate inf --max-concurrency C`, our
`arrival=concurrency`) against the same server at the same moment: SGLang's process is started
first and ours begins as SGLang starts measuring, so the load a shared box puts on the server
falls on both alike and what is left to differ is how each client measures. `compare` holds the
two summaries against BOUNDS. SGLang's prompts come from a ShareGPT-format file of the target
tokenizer's single-word tokens (`--dataset-name random --dataset-path`: nothing downloaded),
which its client encodes, repeats to the length and decodes, and the server encodes back to the
same count."""

from __future__ import annotations

import math
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sglang_mx.bench.load.limits import BenchError
from sglang_mx.bench.load.sglang_bench import (  # noqa: F401 (the peer check's vocabulary)
    read_sglang_result,
    sglang_bench_command,
    sglang_env,
    write_dataset,
)

# |ours / SGLang's - 1| allowed, each figure on its own. Both clients see one server at one
# moment, so what may differ is each client's own overhead. Against a paced server (the null
# upstream with a fixed TTFT and ITL, benchmark/null_upstream.py) every figure is the client's
# measurement of a known time, and all four hold to 10% (measured 2026-12-03: the TTFT and ITL
# medians within 2%). Against a live server on a shared box one request's TTFT swings with the
# neighbours' load, so a latency median is not a client property there: the TTFT ratio ranged
# 0.83-1.15 over 12 side-by-side runs on the 2-core box (one core busy or not, 2026-12-03) and
# 1.83 at load 5-10 (2026-12-02), which no bound that still catches a 40% error would hold.
# Live runs are held to the throughput bounds (LIVE_BOUNDS); their latency medians are shown.
# (Until 2026-12-03 a latency median also passed when a rank-sum test could not tell the two
# samples apart: at 12 samples a 40% error in our TTFT passed that way. Issue 42.)
BOUNDS = {
    "request_throughput": 0.10,
    "output_tok_s": 0.10,
    "ttft_p50_s": 0.10,
    "itl_p50_s": 0.10,
}
LIVE_BOUNDS = {"request_throughput": 0.10, "output_tok_s": 0.10}
SAMPLES = {"ttft_p50_s": "ttft_samples", "itl_p50_s": "itl_samples"}
STARTED = "Starting main benchmark run"  # SGLang prints it after its warm-up (none here)
SGLANG_IDLE_S = 1.0  # then sleeps this long before its first request
OUR_SETUP_S = 0.02  # what our runner spends before its first request (its event loop, client)
TOKEN_SEED = 7  # our prompt tokens differ from other runs' on the same server


@dataclass(frozen=True)
class PeerWorkload:
    input_len: int
    output_len: int
    num_requests: int
    concurrency: int

    def __post_init__(self) -> None:
        for name in ("input_len", "output_len", "num_requests", "concurrency"):
            if getattr(self, name) < 1:
                raise BenchError(f"peer workload: {name} must be at least 1")
        if self.output_len < 2:
            raise BenchError("peer workload: output_len must be at least 2 (ITL needs gaps)")


def sglang_command(
    url: str, tokenizer_dir: str, dataset: Path, w: PeerWorkload, out_file: Path
) -> list[str]:
    """`python -m sglang.benchmark.serving` for `w`: a closed loop at w.concurrency."""
    return sglang_bench_command(
        url, tokenizer_dir, dataset, w.input_len, w.output_len, w.num_requests, out_file,
        rate="inf", concurrency=w.concurrency,
    )  # fmt: skip


def ours_summary(summary) -> dict:
    """Our run summary (a RunSummary) in the same keys as read_sglang_result."""
    same = ("completed", "output_tokens", "duration_s", "request_throughput", "output_tok_s")
    medians = {f"{d}_p50_s": getattr(summary, f"{d}_s").p50 for d in ("ttft", "itl", "tpot")}
    return {k: getattr(summary, k) for k in same} | medians


@dataclass(frozen=True)
class Prepared:
    """Everything our runner needs before its first request, made before SGLang's process
    starts, so that nothing but its event loop stands between the two first requests: whatever
    loading the tokenizer and reading the server's model and limits take on a loaded box would
    otherwise start ours late, and the client that finishes last runs its tail alone, faster
    (CI 2026-12-06: request throughput 0.89 at concurrency 2, our ITL median 11% under
    SGLang's; how much of that was a late start was not measured)."""

    trace: object
    prompts: dict
    tokens: object
    cfg: object


def prepare_ours(url: str, tokenizer_dir: str, w: PeerWorkload) -> Prepared:
    """Trace, prompts, tokenizer, model name and limits for `w`, read now."""
    from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer, materialize
    from sglang_mx.bench.run.runner import RunConfig
    from sglang_mx.capacity.workload import LengthDist, WorkloadSpec
    from sglang_mx.measure.tracegen import generate

    spec = WorkloadSpec(
        name="peer",
        input_len=LengthDist("fixed", w.input_len),
        output_len=LengthDist("fixed", w.output_len),
        hit_rate=0.0,
        prefix_groups=1,
        num_requests=w.num_requests,
        arrival="concurrency",
        concurrency=w.concurrency,
        prime=False,
    )
    trace = generate(spec)
    tokens = SegmentTokens(load_tokenizer(tokenizer_dir), seed=TOKEN_SEED)
    # no /metrics: the server's counters count SGLang's client's requests as well
    model, limits = _model_and_limits(url)
    cfg = RunConfig(url, flush=False, prime=False, warmup=0, progress=False, scrape_metrics=False,
                    model=model, limits=limits)  # fmt: skip
    return Prepared(trace, materialize(trace, tokens), tokens, cfg)


def _model_and_limits(url: str):
    """The runner's own reads: /v1/models' first id and the server's limits."""
    import asyncio

    import httpx
    from sglang_mx.bench.load.limits import read_limits
    from sglang_mx.bench.run.runner import first_model

    async def go():
        async with httpx.AsyncClient(timeout=30) as client:
            model = await first_model(client, url)
            return model, await read_limits(client, url, model)

    return asyncio.run(go())


def run_ours(prep: Prepared) -> dict:
    """Our runner on a prepared workload, the cache left alone (flushed before SGLang's process
    started: a flush now would wait for SGLang's requests, or SGLang's for ours)."""
    from sglang_mx.bench.run.runner import run_trace

    res = run_trace(prep.trace, prep.prompts, prep.cfg, prep.tokens)
    ok = [r for r in res.results if r.ok]
    return ours_summary(res.summary) | {
        "warnings": res.warnings,
        "ttft_samples": [r.ttft for r in ok],
        "itl_samples": [x for r in ok for x in r.itl],
    }


def side_by_side(
    url: str,
    tokenizer_dir: str,
    w: PeerWorkload,
    workdir: Path,
    timeout_s: float = 300.0,
    bounds: dict | None = None,
) -> dict:
    """Both clients on `w` at once: {"ours", "sglang", "rows" (compare against `bounds`,
    default BOUNDS), "sglang_log"}."""
    from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer

    workdir.mkdir(parents=True, exist_ok=True)
    dataset = write_dataset(SegmentTokens(load_tokenizer(tokenizer_dir)), workdir / "peer.json",
                            max(w.num_requests, 16))  # fmt: skip
    out_file = workdir / f"sglang-c{w.concurrency}.jsonl"
    out_file.unlink(missing_ok=True)
    _flush(url)
    prep = prepare_ours(url, tokenizer_dir, w)
    cmd = sglang_command(url, tokenizer_dir, dataset, w, out_file)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=sglang_env(), cwd=workdir)  # fmt: skip
    log: list[str] = []
    try:
        deadline = time.monotonic() + timeout_s
        for line in proc.stdout:
            log.append(line)
            if STARTED in line:
                break
            if time.monotonic() > deadline:
                raise BenchError(f"SGLang's benchmark did not start in {timeout_s:.0f} s")
        else:
            proc.wait(timeout=30)
            raise BenchError(f"SGLang's benchmark exited ({proc.returncode}): {_tail(log)}")
        time.sleep(SGLANG_IDLE_S - OUR_SETUP_S)  # both first requests at about one moment
        ours = run_ours(prep)
        log += proc.stdout.readlines()
        if proc.wait(timeout=timeout_s) != 0:
            raise BenchError(f"SGLang's benchmark failed ({proc.returncode}): {_tail(log)}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    theirs = read_sglang_result(out_file)
    rows = compare(ours, theirs, bounds)
    return {"ours": ours, "sglang": theirs, "rows": rows, "sglang_log": log}


def _flush(url: str) -> None:
    import asyncio

    import httpx
    from sglang_mx.bench.run.runner import flush_cache

    async def go() -> bool:
        async with httpx.AsyncClient(timeout=30) as client:
            return await flush_cache(client, url)

    if not asyncio.run(go()):
        raise BenchError(f"could not flush {url}'s prefix cache before the side-by-side run")


def _tail(log: list[str], n: int = 6) -> str:
    return " | ".join(x.strip() for x in log[-n:] if x.strip())[-1200:]


def rank_sum_p(a: list[float], b: list[float]) -> float:
    """Two-sided p of the Mann-Whitney U test (normal approximation, ties averaged and
    corrected, continuity correction): how likely samples this far apart in rank are when both
    come from one distribution."""
    n_a, n_b = len(a), len(b)
    if not n_a or not n_b:
        return math.nan
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    n, rank_a, ties, i = n_a + n_b, 0.0, 0.0, 0
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        mid = (i + j) / 2 + 1  # the average rank of a run of equal values
        rank_a += mid * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    u = rank_a - n_a * (n_a + 1) / 2
    var = n_a * n_b / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = max(0.0, abs(u - n_a * n_b / 2) - 0.5) / math.sqrt(var)
    return math.erfc(z / math.sqrt(2))


def compare(ours: dict, theirs: dict, bounds: dict | None = None) -> list[dict]:
    """One row per figure of BOUNDS: ours, SGLang's, the ratio, and, where `bounds` (default
    BOUNDS) gives the figure one, the bound and whether the ratio holds it (the bound alone
    decides; the rank-sum p-value of a latency figure's samples is shown, never used)."""
    bounds = BOUNDS if bounds is None else bounds
    rows = []
    for key in BOUNDS:
        a, b = ours[key], theirs[key]
        ratio = a / b if b else math.nan
        bound = bounds.get(key)
        row = {"figure": key, "ours": a, "sglang": b, "ratio": ratio, "bound": bound}
        row["ok"] = bound is None or (not math.isnan(ratio) and abs(ratio - 1) <= bound)
        if key in SAMPLES:
            row["p_value"] = rank_sum_p(ours[SAMPLES[key]], theirs[SAMPLES[key]])
            row["samples"] = (len(ours[SAMPLES[key]]), len(theirs[SAMPLES[key]]))
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| figure | ours | SGLang | ours / SGLang | bound | samples apart (rank-sum p) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ci = ""
        if "p_value" in r:
            n_a, n_b = r["samples"]
            ci = f"p = {r['p_value']:.3f} ({n_a} vs {n_b} samples)"
        bound = "shown" if r["bound"] is None else f"+-{r['bound']:.0%}"
        lines.append(
            f"| {r['figure']} | {r['ours']:.4g} | {r['sglang']:.4g} | {r['ratio']:.3f}"
            f"{'' if r['ok'] else ' OUT'} | {bound} | {ci} |"
        )
    return "\n".join(lines)
