"""`sglang-mx bench calibrate`: the load generator's ceiling against a null server
(calibrate.py), alone or beside SGLang's own benchmark client (calibrate_peer.py)."""

from __future__ import annotations

import json
from pathlib import Path

from sglang_mx.bench import calibrate_peer
from sglang_mx.bench.calibrate import STEP_S, calibrate


def _cmd(args) -> int:
    from sglang_mx.bench.limits import BenchError, fetch_limits
    from sglang_mx.bench.stamp import stamp

    url = args.url.rstrip("/")
    fetch_limits(url)  # an unreachable server is one line, exit 2
    if args.with_sglang:
        return _cmd_side_by_side(args, url)
    out = calibrate(url, args.output_len, args.start_rate, args.max_rate, args.step_s)
    if out["ceiling"] is None:
        raise BenchError(
            f"even {args.start_rate:g} req/s missed the lag limits: is "
            "the box busy, or the server not a null server?"
        )
    out["stamp"] = stamp(None, {"url": url, "client": "sglang-mx bench runner"})
    Path(args.out).write_text(json.dumps(out, indent=1))
    c = out["ceiling"]
    print(f"ceiling: {c['req_s']:.1f} req/s, {c['tok_s']:.0f} streamed tok/s ({args.out})")
    return 0


def _cmd_side_by_side(args, url: str) -> int:
    from sglang_mx.bench.stamp import stamp

    rates, rate = [], args.start_rate
    while rate <= args.max_rate:
        rates.append(rate)
        rate *= 2
    work = Path(args.out).resolve().parent / "calibrate-sglang"
    out = calibrate_peer.side_by_side(
        url, args.with_sglang, rates, args.output_len, args.step_s, work
    )
    client = "sglang-mx bench runner and python -m sglang.benchmark.serving"
    out["stamp"] = stamp(None, {"url": url, "client": client})
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(calibrate_peer.table(out))
    for name, key in (("ours", "ceiling"), ("SGLang's", "sglang_ceiling")):
        c = out[key]
        print(f"{name} ceiling: " + (f"{c['req_s']:.1f} req/s" if c else "none (first step)"))
    return 0


def register(verbs) -> None:
    from sglang_mx.bench.cli_args import one_line_errors

    p = verbs.add_parser("calibrate", help="the load generator's ceiling against a null server")
    p.add_argument("--url", required=True, help="a null server (benchmark/null_upstream.py)")
    p.add_argument("--output-len", type=int, default=32, help="streamed tokens per request")
    p.add_argument("--start-rate", type=float, default=25.0)
    p.add_argument("--max-rate", type=float, default=6400.0)
    p.add_argument("--step-s", type=float, default=STEP_S, help="seconds per rate step")
    p.add_argument(
        "--with-sglang",
        metavar="TOKENIZER_DIR",
        help="also step SGLang's own benchmark client (python -m sglang.benchmark.serving) "
        "through the same rates, each right after ours; its prompts from this tokenizer",
    )
    p.add_argument("-o", "--out", default="calibration.json")
    p.set_defaults(func=one_line_errors(_cmd))
