"""The flags that name a capacity-model input, one definition across `bench`, `plan` and
`roofline` (test_cli_flags walks every verb and fails on a flag defined twice): --workload (a
preset or IN-OUT-HIT) and what overrides it (--input-len, --output-len, --hit-rate,
--concurrency, --num-requests, --seed), the hardware (--hardware, --gpus, --layout, --page-size)
and the precision flags (--expert-bits, --expert-dtype, --dense-dtype, --kv-dtype, --reserve).
OldSpelling keeps a renamed flag working for one release. argparse only, nothing of ours above
capacity."""

from __future__ import annotations

import argparse
import sys

from sglang_mx.capacity.roofline import DTYPE_BYTES, Precision
from sglang_mx.capacity.workload import WORKLOAD_HELP, LengthDist


class OldSpelling(argparse.Action):
    """An old flag name kept for one release (issue 43): sets the new flag's value and says so
    on stderr."""

    def __init__(self, option_strings, dest, new: str, **kw):
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"sglang-mx: note: {option_string} is now {self.new} (the old name works until "
            "the next release)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_workload_arg(p: argparse.ArgumentParser, default: str | None, old: str | None = None):
    """--workload NAME (capacity.workload.named_workload), the one spelling of every command; `old`
    is the command's earlier name for it, kept as a noted alias."""
    p.add_argument("--workload", default=default, metavar="NAME", help=WORKLOAD_HELP)
    if old:
        p.add_argument(old, dest="workload", action=OldSpelling, new="--workload",
                       help=argparse.SUPPRESS)  # fmt: skip


def length(text: str) -> LengthDist:
    """argparse type of a length flag: N (every request N tokens), uniform:LO:HI or
    normal:MEAN:STD."""
    try:
        return LengthDist.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


LENGTH_FLAGS = {
    "--input-len": "prompt tokens",
    "--output-len": "output tokens",
}


def add_length_arg(p: argparse.ArgumentParser, flag: str, default: LengthDist | None = None):
    """--input-len or --output-len: a length distribution (a plain N is every request N tokens);
    roofline, which models one request shape, reads its mean."""
    p.add_argument(flag, type=length, default=default, metavar="LEN",
                   help=f"{LENGTH_FLAGS[flag]}: N, uniform:LO:HI or normal:MEAN:STD (default: "
                   "the workload's; roofline reads the mean)")  # fmt: skip


def add_shape_args(p: argparse.ArgumentParser) -> None:
    """What overrides the named workload's shape: --input-len, --output-len, --hit-rate."""
    for flag in LENGTH_FLAGS:
        add_length_arg(p, flag)
    p.add_argument("--hit-rate", type=float,
                   help="share of prompt tokens served from the prefix cache (default: the "
                   "workload's)")  # fmt: skip


def add_concurrency_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int,
                   help="in-flight requests (default: the workload's; roofline: what the KV "
                   "cache holds)")  # fmt: skip


def add_requests_args(p: argparse.ArgumentParser, seed: bool = True) -> None:
    """--num-requests (how many requests a run, or each sweep point, sends) and, with `seed`,
    --seed (of the trace's lengths, prefixes and arrivals)."""
    p.add_argument("--num-requests", type=int,
                   help="requests per run or sweep point (default: the workload's or "
                   "claim's)")  # fmt: skip
    if seed:
        p.add_argument("--seed", type=int, help="seed of the trace (default: the workload's)")


def add_hardware_args(
    p: argparse.ArgumentParser, hardware: str | None, gpus: int | None, with_gpus: bool = True
) -> None:
    """--hardware (a data/hardware.json name: its $/GPU-h and GPUs per node) and --gpus; the
    defaults are each verb's: bench names nothing unless told, plan and roofline model MI355X."""
    p.add_argument("--hardware", default=hardware,
                   help="a data/hardware.json name, e.g. MI355X, MI300X, B200, H200 (sets "
                   "$/GPU-h; bench: the hardware under test)")  # fmt: skip
    if with_gpus:
        p.add_argument("--gpus", type=int, default=gpus,
                       help="GPUs serving (bench default: a node of --hardware, else "
                       "1)")  # fmt: skip


def add_layout_arg(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--layout", default=default,
                   help="comma-separated node layouts: tp8, tp4xdp2, tp8-dpattn8, tp4-ep; plan "
                   "also pd:tp4+tp4 (default %(default)s)")  # fmt: skip


def add_page_size_arg(p: argparse.ArgumentParser, default: int | None) -> None:
    p.add_argument("--page-size", type=int, default=default,
                   help="the server's KV page size in tokens (bench default 1; plan: "
                   "SGLang's)")  # fmt: skip


def add_precision_args(p: argparse.ArgumentParser) -> None:
    """The precision flags `precision_from_args` reads, plus --reserve (HBM kept back)."""
    p.add_argument("--expert-bits", type=float, default=4.25, help="4.25 = MXFP4 with scales")
    p.add_argument("--expert-dtype", default="fp4", choices=("fp4", "fp8", "bf16"))
    p.add_argument("--dense-dtype", default="bf16", choices=tuple(DTYPE_BYTES))
    p.add_argument("--kv-dtype", default="fp8", choices=tuple(DTYPE_BYTES))
    p.add_argument("--reserve", type=float, default=0.10, help="HBM share kept for activations")


def precision_from_args(args: argparse.Namespace):
    """The roofline's Precision from the shared --expert-bits/--expert-dtype/--dense-dtype/
    --kv-dtype flags (also used by `sglang-mx plan`)."""
    return Precision.from_dtypes(
        args.expert_bits, args.expert_dtype, args.dense_dtype, args.kv_dtype
    )
