"""The flags that name a capacity-model input, one spelling across `bench`, `plan` and
`roofline`: --workload (a preset or IN-OUT-HIT) and the precision flags (--expert-bits,
--expert-dtype, --dense-dtype, --kv-dtype, --reserve); OldSpelling keeps a renamed flag working
for one release. argparse only, nothing of ours above capacity."""

from __future__ import annotations

import argparse
import sys

from sglang_mx.capacity.roofline import DTYPE_BYTES, Precision


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
    from sglang_mx.capacity.workload import WORKLOAD_HELP

    p.add_argument("--workload", default=default, metavar="NAME", help=WORKLOAD_HELP)
    if old:
        p.add_argument(old, dest="workload", action=OldSpelling, new="--workload",
                       help=argparse.SUPPRESS)  # fmt: skip


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
