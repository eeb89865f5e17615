"""Fault counts for the CPU PD topology, recorded: provider -> smg (PD) -> one prefill
and one decode server of the default tiny GLM-5 (Mooncake over TCP, both sides sharing the cores,
both supervised). Each round kills one side (SIGKILL of its process group) while `--streams`
streamed requests are decoding, then sends a request every 2 s until one completes; counts
completed / failed (fast, OpenAI-shaped) / hung / broken per fault, restart and re-route times,
and ledger problems, into docs/results/pd-faults-cpu.json (the suite's test_pd_topology.py runs
one round of each with the same code).

    .venv/bin/python scripts/record_pd_faults.py --rounds 3 --streams 6
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from tempfile import TemporaryDirectory

OUT = Path("docs/results/pd-faults-cpu.json")
MODEL_ID = "sglang-mx/glm5-tiny"
PRICES = {"prompt": 0.5, "completion": 2.0, "input_cache_read": 0.05}


def _pricing(path: Path, upstream: str) -> Path:
    import httpx

    served = httpx.get(upstream + "/v1/models", timeout=30).json()["data"][0]
    ctx = int(served.get("max_model_len") or 512)
    entry = {"id": MODEL_ID, "upstream_model": served["id"], "name": "GLM-5 tiny",
             "context_length": ctx, "max_completion_tokens": ctx - 256,
             "quantization": "mxfp4", "usd_per_m": PRICES}  # fmt: skip
    path.write_text(json.dumps({"models": [entry]}))
    return path


def markdown(record: dict) -> str:
    """The totals as the table docs/scale-out.md quotes."""
    rows = ["| side killed | kills | live streams at each kill: completed / failed / hung / broken "
            "| sent while down or coming back: completed / failed / hung / broken "
            "| side serving again after (s) | routed again after (s) | ledger problems |",
            "|---|---:|---|---|---|---|---:|"]  # fmt: skip
    for side, t in record["totals"].items():
        runs = [r for r in record["runs"] if r["side"] == side]
        cells = [side, str(len(runs))]
        for phase in ("during", "after"):
            cells.append(" / ".join(str(t[phase][k]) for k in ("completed", "failed", "hung",
                                                               "broken")))  # fmt: skip
        for key in ("side_serving_after_s", "routed_again_after_s"):
            cells.append(", ".join(str(r[key]) for r in runs))
        cells.append(str(t["ledger_problems"]))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="kills of each side")
    ap.add_argument("--streams", type=int, default=6, help="streamed requests live at each kill")
    ap.add_argument("--bound-s", type=float, default=300.0, help="a request past this is hung")
    ap.add_argument("--stall-s", type=float, default=30.0, help="so is one silent this long")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    from sglang_mx.measure.stamp import stamp
    from sglang_mx.provider.keys import KeyStore
    from sglang_mx.provider.launch import pd_router_process, provider_process
    from sglang_mx_lab.testing.pd_faults import fault_run
    from sglang_mx_lab.testing.pd_servers import FAULT_ENV, start_pd_sides
    from sglang_mx_lab.testing.server import default_serve_args

    model, serve_args = default_serve_args()
    runs = []
    t0 = time.monotonic()
    with TemporaryDirectory() as tmp, ExitStack() as stack:
        sides = start_pd_sides(model, serve_args)
        stack.callback(sides.close)
        sides.wait_serving()
        start_s = time.monotonic() - t0
        router = stack.enter_context(
            pd_router_process(
                [(sides.prefill.base_url, sides.bootstrap_port)], [sides.decode.base_url]
            )  # fmt: skip
        )
        db = Path(tmp) / "provider.sqlite"
        _, key = KeyStore(db).create("pd-faults")
        pricing = _pricing(Path(tmp) / "pricing.json", sides.decode.base_url)
        rpm = ("--default-rpm", "1000000")
        prov = stack.enter_context(provider_process(router, pricing, db, *rpm))
        for i in range(args.rounds):
            for side in ("decode", "prefill"):
                run = fault_run(sides, side, prov.url, key, MODEL_ID, db,
                                streams=args.streams, max_tokens=args.max_tokens,
                                bound_s=args.bound_s, stall_s=args.stall_s,
                                log=print)  # fmt: skip
                runs.append({"round": i, **run})
    totals = {}
    for side in ("decode", "prefill"):
        mine = [r for r in runs if r["side"] == side]
        totals[side] = {
            phase: {k: sum(r[phase][k] for r in mine) for k in mine[0][phase]}
            for phase in ("during", "after")
        }
        totals[side]["ledger_problems"] = sum(len(r["ledger_problems"]) for r in mine)
        totals[side]["max_routed_again_after_s"] = max(
            (r["routed_again_after_s"] or float("inf")) for r in mine
        )
    record = {
        "stamp": stamp(
            None,
            {
                "model": model,
                "serve_args": serve_args,
                "transfer": "mooncake TCP on loopback",
                "cores": "prefill and decode asked for a core each (SGLANG_CPU_OMP_THREADS_BIND, "
                "not applied without AMX: both shared the 2 cores)",
                "sides_env": FAULT_ENV,
            },
        ),  # fmt: skip
        "what": "PD sides killed under streaming load through provider and smg",
        "command": "python scripts/record_pd_faults.py " + " ".join(sys.argv[1:]),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "topology_start_s": round(start_s, 1),
        "totals": totals,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(totals, indent=1))
    print(markdown(record))
    bad = any(t[p]["hung"] or t[p]["broken"] for t in totals.values() for p in ("during", "after"))
    return 1 if bad or any(t["ledger_problems"] for t in totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
