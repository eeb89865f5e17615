"""The flags of a measured or simulated run, one definition for `bench run|sweep|verify` and
`plan`: the SLO (--slo-ttft, --slo-tpot, --slo-itl, --slo-e2e, --slo-percentile; old --slo and
--tpot-slo) and the sweep's load values (--rates, --concurrencies). Unset SLO flags leave the
verb's base SLO: metrics.Slo()'s (TTFT <= 5 s at p95) for run, sweep and plan, the claim's for
verify; the readers (slo_from_args, sweep_values) raise ValueError with the flag's name."""

from __future__ import annotations

import argparse
import dataclasses

from sglang_mx.capacity.flags import OldSpelling
from sglang_mx.measure.metrics import Slo
from sglang_mx.measure.summary import PERCENTILES

# flag -> (argparse dest, the metrics.Slo fields it sets)
SLO_FLAGS = {
    "--slo-ttft": ("slo", ("ttft_p95_s", "ttft_s")),
    "--slo-tpot": ("slo_tpot", ("tpot_s",)),
    "--slo-itl": ("slo_itl", ("itl_s",)),
    "--slo-e2e": ("slo_e2e", ("e2e_s",)),
    "--slo-percentile": ("slo_percentile", ("percentile",)),
}
_BASE = "(default: 5 s TTFT at p95; verify: the claim's)"


def add_slo_args(p: argparse.ArgumentParser) -> None:
    """The SLO flags; every limit is both the run's percentile gate and the per-request goodput
    limit (metrics.Slo)."""
    p.add_argument("--slo-ttft", dest="slo", type=float, metavar="S",
                   help=f"TTFT limit in seconds at --slo-percentile {_BASE}")  # fmt: skip
    p.add_argument("--slo-tpot", type=float, metavar="S",
                   help="TPOT limit in seconds (per request: (E2E - TTFT) / (tokens - "
                   "1))")  # fmt: skip
    p.add_argument("--slo-itl", type=float, metavar="S",
                   help="ITL limit in seconds (every inter-token gap)")  # fmt: skip
    p.add_argument("--slo-e2e", type=float, metavar="S", help="end-to-end latency limit (s)")
    p.add_argument("--slo-percentile", type=int, choices=PERCENTILES,
                   help=f"the percentile every limit is judged at {_BASE}")  # fmt: skip
    # old spellings, until the next release
    p.add_argument("--slo", dest="slo", type=float, action=OldSpelling, new="--slo-ttft",
                   help=argparse.SUPPRESS)  # fmt: skip
    p.add_argument("--tpot-slo", dest="slo_tpot", type=float, action=OldSpelling,
                   new="--slo-tpot", help=argparse.SUPPRESS)  # fmt: skip


def slo_from_args(args: argparse.Namespace, base: Slo | None = None) -> Slo:
    """`base` (metrics.Slo() when None) with each --slo* flag given taking its place."""
    slo = Slo() if base is None else base
    for flag, (dest, fields) in SLO_FLAGS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if flag != "--slo-percentile" and not value > 0:
            raise ValueError(f"{flag} {value}: a limit in seconds must be > 0")
        slo = dataclasses.replace(slo, **dict.fromkeys(fields, value))
    return slo


def slo_flags_given(args: argparse.Namespace) -> list[str]:
    """`--slo-ttft 2` etc. for each SLO flag given (verify names them in its verdict)."""
    return [
        f"{flag} {getattr(args, dest):g}"
        for flag, (dest, _) in SLO_FLAGS.items()
        if getattr(args, dest, None) is not None
    ]


def add_sweep_args(p: argparse.ArgumentParser) -> None:
    """--rates / --concurrencies: the load values of a sweep (give exactly one)."""
    p.add_argument("--rates", metavar="R,R,...",
                   help="comma-separated requests/s (open loop), e.g. 0.5,1,1.5,2,2.4")  # fmt: skip
    p.add_argument("--concurrencies", metavar="N,N,...",
                   help="comma-separated in-flight requests (closed loop), e.g. "
                   "1,2,4,8")  # fmt: skip


def _floats(text: str | None, flag: str) -> list[float]:
    if not text:
        return []
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag} {text!r}: comma-separated numbers, e.g. 1,2,2.4") from None
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{flag} {text!r}: values must be > 0")
    return values


def sweep_values(args: argparse.Namespace) -> tuple[str, list[float]]:
    """("rate" or "concurrency", the values) of --rates / --concurrencies."""
    rates = _floats(args.rates, "--rates")
    concs = _floats(args.concurrencies, "--concurrencies")
    if bool(rates) == bool(concs):
        raise ValueError("give exactly one of --rates or --concurrencies")
    return ("rate", rates) if rates else ("concurrency", concs)
