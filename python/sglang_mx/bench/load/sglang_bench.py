"""SGLang's own benchmark client (`python -m sglang.benchmark.serving`), driven offline: a
ShareGPT-format prompt file of the target tokenizer's single-word tokens (`--dataset-name random
--dataset-path`: nothing downloaded), its command line, its environment and its result record in
our summary's units. `bench calibrate --with-sglang` runs it beside our runner; the suite's peer
comparison (sglang_mx_lab.peer) does too."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from sglang_mx.bench.load.limits import BenchError


def write_dataset(tokens, path: Path, n: int, words: int = 48) -> Path:
    """A ShareGPT-format file of `n` distinct prompts of `words` single-word tokens each."""
    rows = [
        {
            "conversations": [
                {"from": "human", "value": tokens.text(tokens.segment(f"peer{i}", words))},
                {"from": "gpt", "value": " ok"},
            ]
        }
        for i in range(n)
    ]
    path.write_text(json.dumps(rows))
    return path


def sglang_bench_command(
    url: str,
    tokenizer_dir: str,
    dataset: Path,
    input_len: int,
    output_len: int,
    num_requests: int,
    out_file: Path,
    rate: str | float = "inf",
    concurrency: int | None = None,
) -> list[str]:
    """SGLang's benchmark client: fixed lengths from the dataset file, no warm-up, Poisson
    arrivals at `rate` (inf: all due at once), at most `concurrency` in flight (None: no cap);
    the tokenizer directory doubles as the model name, so nothing is looked up online."""
    cmd = [
        sys.executable, "-m", "sglang.benchmark.serving",
        "--backend", "sglang-oai", "--base-url", url, "--tokenizer", tokenizer_dir,
        "--model", tokenizer_dir, "--ready-check-timeout-sec", "0",
        "--dataset-name", "random", "--dataset-path", str(dataset),
        "--random-input-len", str(input_len), "--random-output-len", str(output_len),
        "--random-range-ratio", "1.0", "--num-prompts", str(num_requests),
        "--request-rate", str(rate), "--warmup-requests", "0",
        "--output-file", str(out_file), "--output-details", "--disable-tqdm",
    ]  # fmt: skip
    if concurrency is not None:
        cmd += ["--max-concurrency", str(concurrency)]
    return cmd


def sglang_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def read_sglang_result(path: Path) -> dict:
    """The last record SGLang appended to its --output-file, in our summary's units."""
    try:
        d = json.loads(path.read_text().splitlines()[-1])
    except (OSError, IndexError, ValueError) as exc:
        raise BenchError(f"no SGLang benchmark result in {path} ({exc})") from None
    return {
        "completed": d["completed"],
        "output_tokens": d["total_output_tokens"],
        "duration_s": d["duration"],
        "request_throughput": d["request_throughput"],
        "output_tok_s": d["output_throughput"],
        "ttft_p50_s": d["median_ttft_ms"] / 1e3,
        "itl_p50_s": d["median_itl_ms"] / 1e3,
        "tpot_p50_s": d["median_tpot_ms"] / 1e3,
        "ttft_samples": list(d.get("ttfts") or []),
        "itl_samples": [x for gaps in d.get("itls") or [] for x in gaps],
    }
