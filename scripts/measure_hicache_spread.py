"""How far a prefix restored from HiCache's host tier serves from a cold recompute, per page layout.

Starts the three servers of test/sglang_mx/serving/test_hicache_serving.py (same arguments, no
plant) and runs its evict-then-restore case on seeded random prompts, recording for each case the
largest |restored - cold| greedy log-prob over the generated tokens, whether the tokens agree, and
any other problem the test's check finds. `--unchunked` drops the test's 256-token prefill chunks,
under which a cold prefill sums in another order than a cached one (docs/baselines.md).

    PYTHONPATH=python:lab:sgl-kernel-rocm python scripts/measure_hicache_spread.py \
        --seeds 0:60 [--unchunked] --out /tmp/hicache_spread.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT / "test/sglang_mx/serving/test_hicache_serving.py"


def load_case_module():
    spec = importlib.util.spec_from_file_location("hicache_case", TEST)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def spread(case: dict) -> dict:
    cold, got = case["cold"], case["restored"]
    diffs = [abs(a - b) for a, b in zip(got["logprobs"], cold["logprobs"], strict=True)]
    return {
        "max_abs": max(diffs),
        "by_position": diffs,
        "tokens_equal": got["tokens"] == cold["tokens"],
        "verify": [case["cold"]["verify"], got["verify"]],
    }


def seed_range(text: str) -> tuple[int, int]:
    """'start:stop' -> (start, stop), or a message argparse prints."""
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want start:stop, e.g. 0:60") from None
    if not 0 <= lo < hi:
        raise argparse.ArgumentTypeError(f"{text!r}: want 0 <= start < stop")
    return lo, hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=seed_range, default="0:60", help="start:stop of the seeds")
    ap.add_argument("--out", required=True)
    ap.add_argument("--unchunked", action="store_true",
                    help="without the test's 256-token prefill chunks (its CHUNK)")  # fmt: skip
    args = ap.parse_args()
    lo, hi = args.seeds

    from sglang_mx_lab.testing.server import default_serve_args, start_servers

    mod = load_case_module()
    model, base = default_serve_args()
    tmp = Path(tempfile.mkdtemp(prefix="hicache-spread-"))
    switches = {n: tmp / n for n in mod.SERVERS}
    env = {"PYTHONPATH": os.pathsep.join([str(mod.PLANT), os.environ.get("PYTHONPATH", "")])}
    more = [] if args.unchunked else mod.CHUNK
    specs = [
        (model, [*base, "--dtype", "float32", *mod.HICACHE, *mod.POOL, *extra, *more],
         {**env, "SGLANG_MX_PLANT_HICACHE": str(switches[n])}, None)
        for n, extra in mod.SERVERS.items()
    ]  # fmt: skip
    handles = start_servers(specs, timeout=900)
    rows = []
    try:
        for seed in range(lo, hi):
            for name, handle in zip(mod.SERVERS, handles, strict=True):
                random.seed(seed)
                t0 = time.monotonic()
                case = mod.restore(handle.base_url, switches[name])
                others = [p for p in mod.problems(name, case) if "!= cold recompute" not in p]
                rows.append({"seed": seed, "server": name, **spread(case), "other_problems": others,
                             "seconds": round(time.monotonic() - t0, 2)})  # fmt: skip
                print(json.dumps({k: rows[-1][k] for k in ("seed", "server", "max_abs")}),
                      flush=True)  # fmt: skip
    finally:
        for h in handles:
            h.stop(wait=False)
    import sglang
    import torch

    record = {
        "what": "max |restored - cold| greedy log-prob (nats) over 8 generated tokens, per case",
        "seeds": [lo, hi],
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hardware": f"{platform.machine()} CPU, {os.cpu_count()} cores, no GPU",
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "sglang": sglang.__version__,
        },
        "servers": {
            n: [*mod.HICACHE, *mod.POOL, *extra, *more] for n, extra in mod.SERVERS.items()
        },
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
