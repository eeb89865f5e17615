"""`sglang-mx bench calibrate`: the load generator's ceiling against a null server
(calibrate.py), alone or beside SGLang's own benchmark client (calibrate_peer.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sglang_mx.bench.run import calibrate_peer
from sglang_mx.bench.run.calibrate import STEP_S, calibrate, with_processes


def _cmd(args) -> int:
    from sglang_mx.bench.load.limits import BenchError, fetch_limits
    from sglang_mx.measure.stamp import stamp

    url = args.url.rstrip("/")
    counts = climb_counts(args.processes)
    fetch_limits(url)  # an unreachable server is one line, exit 2
    if args.with_sglang:
        return _cmd_side_by_side(args, url, counts, tokenizer_dir(args.with_sglang))
    out = calibrate(url, output_len(args), args.start_rate, args.max_rate, args.step_s)
    out = with_processes(out, counts, lambda n: _climb(args, url, n))
    if out["ceiling"] is None:
        raise BenchError(
            f"even {args.start_rate:g} req/s missed the lag limits: is "
            "the box busy, or the server not a null server?"
        )
    out["stamp"] = stamp(None, {"url": url, "client": "sglang-mx bench runner"})
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(ceilings(out) + f" ({args.out})")
    return 0


def tokenizer_dir(text: str) -> str:
    """--with-sglang's directory, absolute: SGLang's client reads a relative path as a hub repo
    id, and nothing here may reach a hub."""
    from sglang_mx.bench.load.limits import BenchError

    path = Path(text).expanduser()
    if not (path / "tokenizer_config.json").is_file() and not (path / "tokenizer.json").exists():
        raise BenchError(f"--with-sglang {text!r}: not a local tokenizer directory")
    return str(path.resolve())


def climb_counts(counts: tuple[int, ...] | None) -> list[int]:
    """--processes as the counts to climb with: 1 (the ceiling) among them."""
    from sglang_mx.bench.load.limits import BenchError

    counts = counts or (1,)
    if 1 not in counts:
        raise BenchError(f"--processes {','.join(map(str, counts))}: counts like 1,2,4 (1 "
                         "included: the ceiling)")  # fmt: skip
    return sorted(set(counts))


def output_len(args) -> int:
    """--output-len as the one length every calibration request streams."""
    from sglang_mx.bench.load.limits import BenchError

    if args.output_len.kind != "fixed":
        raise BenchError("--output-len: calibrate streams one length, give N")
    return args.output_len.value


def _climb(args, url: str, processes: int) -> dict:
    return calibrate(url, output_len(args), args.start_rate, args.max_rate, args.step_s, processes)


def ceilings(out: dict) -> str:
    """One line per process count: its ceiling."""
    lines = []
    for n, c in out["by_processes"].items():
        got = f"{c['req_s']:.1f} req/s, {c['tok_s']:.0f} streamed tok/s" if c else "none"
        lines.append(f"ceiling at {n} process(es): {got}")
    return "\n".join(lines)


def _cmd_side_by_side(args, url: str, counts: list[int], tokenizer: str) -> int:
    from sglang_mx.measure.stamp import stamp

    rates, rate = [], args.start_rate
    while rate <= args.max_rate:
        rates.append(rate)
        rate *= 2
    work = Path(args.out).resolve().parent / "calibrate-sglang"
    out = calibrate_peer.side_by_side(url, tokenizer, rates, output_len(args), args.step_s, work)
    out = with_processes(out, counts, lambda n: _climb(args, url, n))
    client = "sglang-mx bench runner and python -m sglang.benchmark.serving"
    out["stamp"] = stamp(None, {"url": url, "client": client})
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(calibrate_peer.table(out))
    print(ceilings(out))
    c = out["sglang_ceiling"]
    print("SGLang's ceiling: " + (f"{c['req_s']:.1f} req/s" if c else "none (first step)"))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from sglang_mx.bench.cli.args import processes_arg, url_arg
    from sglang_mx.capacity.flags import add_length_arg
    from sglang_mx.capacity.workload import LengthDist

    p = subparsers.add_parser(
        "calibrate", help="the load generator's ceiling against a null server"
    )
    url_arg(p)
    add_length_arg(p, "--output-len", LengthDist("fixed", 32))  # streamed tokens per request
    p.add_argument("--start-rate", type=float, default=25.0)
    p.add_argument("--max-rate", type=float, default=6400.0)
    p.add_argument("--step-s", type=float, default=STEP_S, help="seconds per rate step")
    p.add_argument(
        "--with-sglang",
        metavar="TOKENIZER_DIR",
        help="also step SGLang's own benchmark client (python -m sglang.benchmark.serving) "
        "through the same rates, each right after ours; its prompts from this tokenizer",
    )
    processes_arg(p)
    p.add_argument("-o", "--out", default="calibration.json")
    p.set_defaults(func=_cmd)
