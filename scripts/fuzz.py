"""`make fuzz`: a long hostile-request campaign against a supervised SGLang server with the
sglang_mx plugin, from a random seed (or --seed). Every new crash class (worker death, 5xx,
traceback) is shrunk to the fewest fields that still fail and written as a regression case into
test/sglang_mx/fuzz_regressions/, which the test suite replays. Exits 1 if anything was found.

    python scripts/fuzz.py --minutes 30            # what `make fuzz` runs
    SGLANG_MX_GUARDS=0 python scripts/fuzz.py ...  # against SGLang without our guards
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--batch", type=int, default=200, help="cases per hypothesis run")
    ap.add_argument("--out", type=Path, default=ROOT / "test/sglang_mx/fuzz_regressions")
    ap.add_argument("--model-path", default=None, help="default: the bundled MXFP4 model")
    args = ap.parse_args(argv)

    from sglang_mx.assets import bundled_model_path
    from sglang_mx.testing.campaign import Campaign, save_regression
    from sglang_mx.testing.hostile import Target
    from sglang_mx.testing.server import SupervisedServer

    seed = args.seed if args.seed is not None else random.randrange(2**32)
    guards = "off" if os.environ.get("SGLANG_MX_GUARDS") == "0" else "on"
    print(f"fuzz: seed {seed}, {args.minutes:g} min, guards {guards}", flush=True)
    server = SupervisedServer(args.model_path or bundled_model_path("mxfp4"),
                              ["--enable-cache-report"], {})  # fmt: skip
    try:
        server.wait_healthy()
        import httpx

        info = httpx.get(server.base_url + "/get_model_info", timeout=30).json()
        model = httpx.get(server.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
        target = Target(model, info["vocab_size"], info["context_length"])
        campaign = Campaign(server, target)

        def found(crash) -> None:
            path = save_regression(crash, args.out, model)
            print(f"fuzz: NEW {crash.crash_class}\n      -> {path}", flush=True)

        deadline = time.monotonic() + args.minutes * 60
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            campaign.run(args.batch, rng.randrange(2**32), on_crash=found)
            r = campaign.result
            print(f"fuzz: {r.tried} requests, {r.deaths} worker deaths, "
                  f"{len(r.classes)} crash classes", flush=True)  # fmt: skip
    finally:
        server.close()
    r = campaign.result
    print(f"fuzz: done: seed {seed}, {r.tried} requests, {r.deaths} deaths, "
          f"{len(r.classes)} classes", flush=True)  # fmt: skip
    return 1 if r.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
