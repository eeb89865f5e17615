"""Step time and peak memory of the tiny GLM-5 long-context trainer (scripts/
train_tiny_glm5_long.py) on this machine: one forward + backward + AdamW step, batch 1, for the
sparse stage (top-2048, YaRN to 32k) at 4k/8k/16k/32k tokens and the indexer's dense warm-up at
2k/4k, each size in its own process so its peak RSS (ru_maxrss) is its own.

    python benchmark/tiny_long_step_time.py --out docs/results/tiny_glm5_long_step_time.json
    python benchmark/tiny_long_step_time.py --only sparse:32768 --steps 1 --merge   # add a row

Each row records the 1-minute load average before and after its steps: on a shared box other
jobs take cores, and a step's time is only comparable at a similar load. The first step of a
process pays for first-touch allocation; the row reports every step's time and `step_s`, the
fastest.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SIZES = ("sparse:4096", "sparse:8192", "sparse:16384", "sparse:32768", "warmup:2048",
         "warmup:4096")  # fmt: skip
OUT = ROOT / "docs/results/tiny_glm5_long_step_time.json"
BUNDLED = "bundled tiny-glm5-bf16"


def _key(row: dict) -> tuple:
    """A row's place in the record: its size and the weights it started from (rows written
    before --init existed started from the bundled model)."""
    return row["stage"], row["tokens"], row.get("init", BUNDLED)


def one(stage: str, length: int, steps: int, threads: int, chunk: int, init: str | None) -> dict:
    """Run `steps` training steps at one size in this process, from the weights at `init` (the
    bundled model when None); the row. The sparse step's cost follows how many distinct keys a
    chunk's queries pick, which a trained indexer may change: rows from a stage's output say."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from long_data import LongData
    from sglang_mx.assets import bundled_model_path
    from tiny_common import load_eager
    from train_tiny_glm5_long import prepare, settings, train_step, yarn_config
    from transformers import AutoTokenizer

    torch.set_num_threads(threads)
    path = init or bundled_model_path("glm5-bf16")
    model = load_eager(path).train()
    yarn_config(model, 32768, 2048)
    opt = torch.optim.AdamW(prepare(model, stage), lr=1e-5)
    st = settings(stage, 2048, chunk, length)
    data = LongData(AutoTokenizer.from_pretrained(path), "train")
    load_before = os.getloadavg()[0]
    times, losses = [], []
    for i in range(steps):
        ids = data.sample(i, length).ids
        t0 = time.perf_counter()
        losses.append(train_step(model, opt, ids, st, stage))
        times.append(round(time.perf_counter() - t0, 2))
    return {
        "stage": stage,
        "tokens": length,
        "step_s": min(times),
        "steps_s": times,
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "load_1min_before": round(load_before, 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
        "losses": losses,
        "init": init or BUNDLED,
        "settings": {"topk": st.topk if stage == "sparse" else "dense", "chunk": st.chunk,
                     "checkpoint_chunks": st.checkpoint_chunks, "threads": threads},
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", default=",".join(SIZES), help="stage:tokens, comma-separated")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--merge", action="store_true", help="keep --out's other rows")
    ap.add_argument("--init", default=None, help="weights to start from (default: bundled)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    if args.one:
        stage, n = args.one.split(":")
        print(json.dumps(one(stage, int(n), args.steps, args.threads, args.chunk, args.init)))
        return

    from sglang_mx.measure.stamp import stamp

    rows = json.loads(args.out.read_text())["rows"] if args.merge and args.out.exists() else []
    for size in args.only.split(","):
        cmd = [sys.executable, __file__, "--one", size, "--steps", str(args.steps),
               "--threads", str(args.threads), "--chunk", str(args.chunk)]  # fmt: skip
        cmd += ["--init", args.init] if args.init else []
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows = [r for r in rows if _key(r) != _key(row)]
        rows.append(row)
        print(f"{row['stage']:7} {row['tokens']:6}  step {row['step_s']:8.1f} s  peak RSS "
              f"{row['peak_rss_gib']:5.2f} GiB  load {row['load_1min_before']:.1f}"
              f"->{row['load_1min_after']:.1f}", flush=True)  # fmt: skip
        record = {
            "benchmark": "tiny_glm5_long_step_time",
            "stamp": stamp(config={"model": "tiny-glm5-bf16, float32", "batch": 1,
                                   "rope": "yarn x64 from 512 (SGLang deepseek_yarn)",
                                   "optimizer": "AdamW", "threads": args.threads,
                                   "note": "shared 2-core box: other jobs' load recorded"}),
            "rows": sorted(rows, key=lambda r: (_key(r)[2], *_key(r)[:2])),
        }  # fmt: skip
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
