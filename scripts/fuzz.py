"""`make fuzz`: a long hostile-request campaign against supervised SGLang servers with the
sglang_mx plugin, from a random seed (or --seed), on each bundled model in turn (the time split
evenly): the default GLM-5 model that `sglang-mx serve` serves (mx_dsa, MLA + DSA, page 64,
chunked prefill) and the GLM-4.5 one (GQA). Every new crash class (worker death, 5xx, traceback,
no answer) is shrunk to the fewest fields that still fail and written as a regression case into
test/sglang_mx/guards/fuzz_regressions/, which the test suite replays against both. Exits 1 if
anything was found.

    python scripts/fuzz.py --minutes 30            # what `make fuzz` runs
    python scripts/fuzz.py --models glm5-default   # one model
    SGLANG_MX_GUARDS=0 python scripts/fuzz.py ...  # against SGLang without our guards
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sglang_mx_lab.testing.campaign import CampaignResult

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("glm5-default", "glm45-mxfp4")


def server_args(name: str, model_path: str | None) -> tuple[str, list[str]]:
    """(model path, SGLang arguments) for a --models name."""
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.server import default_serve_args

    if model_path is not None:
        return model_path, ["--enable-cache-report"]
    if name == "glm5-default":
        return default_serve_args()  # exactly what `sglang-mx serve` runs
    return bundled_model_path("mxfp4"), ["--enable-cache-report"]


def fuzz_model(
    name: str, path: str, args: list[str], minutes: float, seed: int, batch: int, out: Path
) -> CampaignResult:
    import httpx
    from sglang_mx_lab.testing.campaign import Campaign, save_regression
    from sglang_mx_lab.testing.hostile import Target
    from sglang_mx_lab.testing.server import SupervisedServer

    print(f"fuzz: {name}: {path} {' '.join(args)}, {minutes:g} min", flush=True)
    server = SupervisedServer(path, args, {})
    try:
        server.wait_healthy()
        info = httpx.get(server.base_url + "/get_model_info", timeout=30).json()
        model = httpx.get(server.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
        target = Target(model, info["vocab_size"], info["context_length"])
        campaign = Campaign(server, target)

        def found(crash) -> None:
            saved = save_regression(crash, out, model)
            print(f"fuzz: {name}: NEW {crash.crash_class}\n      -> {saved}", flush=True)

        deadline = time.monotonic() + minutes * 60
        rng = random.Random(seed)
        while (left := deadline - time.monotonic()) > 0:
            campaign.run(batch, rng.randrange(2**32), on_crash=found, budget_s=left)
            r = campaign.result
            print(f"fuzz: {name}: {r.tried} requests, {r.deaths} worker deaths, "
                  f"{len(r.classes)} crash classes", flush=True)  # fmt: skip
    finally:
        server.close()
    return campaign.result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="in all, split across --models")
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--batch", type=int, default=200, help="cases per hypothesis run (seed)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated of {MODELS}")
    ap.add_argument("--out", type=Path, default=ROOT / "test/sglang_mx/guards/fuzz_regressions")
    ap.add_argument("--model-path", default=None, help="fuzz this model instead (one run)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    args = ap.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(MODELS))
    if unknown or not names:
        ap.error(f"--models: unknown {unknown}; choose from {', '.join(MODELS)}")
    if args.model_path is not None:
        names = ["custom"]

    seed = args.seed if args.seed is not None else random.randrange(2**32)
    guards = "off" if os.environ.get("SGLANG_MX_GUARDS") == "0" else "on"
    print(f"fuzz: seed {seed}, {args.minutes:g} min over {', '.join(names)}, guards {guards}",
          flush=True)  # fmt: skip
    minutes = args.minutes / len(names)
    plan = [(name, *server_args(name, args.model_path)) for name in names]
    if args.dry_run:
        for name, path, sargs in plan:
            print(f"fuzz: plan: {name}: {path} {' '.join(sargs)}, {minutes:g} min")
        return 0
    results = {}
    for name, path, sargs in plan:
        results[name] = fuzz_model(name, path, sargs, minutes, seed, args.batch, args.out)
    for name, r in results.items():
        print(f"fuzz: done: {name}: seed {seed}, {r.tried} requests, {r.deaths} deaths, "
              f"{len(r.classes)} classes", flush=True)  # fmt: skip
    return 1 if any(r.crashes for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
