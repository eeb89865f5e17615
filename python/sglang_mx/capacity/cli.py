"""`sglang-mx roofline`: per-node throughput limit of a model on a hardware/layout/workload, and
measured / limit when a measured figure is given."""

from __future__ import annotations

import argparse
import json
import sys

from sglang_mx.capacity.flags import (
    add_concurrency_arg,
    add_hardware_args,
    add_layout_arg,
    add_precision_args,
    add_shape_args,
    add_workload_arg,
    precision_from_args,
)


def workload_from_args(args: argparse.Namespace):
    """roofline.Workload of --workload NAME (its mean lengths and hit rate), each of
    --input-len / --output-len / --hit-rate given taking the place of the workload's; a length
    given as a distribution counts at its mean (the roofline models one request shape)."""
    from sglang_mx.capacity.roofline import Workload
    from sglang_mx.capacity.workload import named_workload

    spec = named_workload(args.workload)
    input_len = args.input_len if args.input_len is not None else spec.input_len
    output_len = args.output_len if args.output_len is not None else spec.output_len
    return Workload(
        round(input_len.mean),
        round(output_len.mean),
        args.hit_rate if args.hit_rate is not None else spec.hit_rate,
    )


DEFAULT_LAYOUTS = "tp8,tp4xdp2,tp2xdp4,tp8-dpattn8"


def _run(args: argparse.Namespace) -> int:
    from sglang_mx.capacity.hardware import get_hardware
    from sglang_mx.capacity.modelspec import load_model
    from sglang_mx.capacity.parallel import parse_layout
    from sglang_mx.capacity.roofline import limits

    try:  # what the flags name: a bad one ends in one line on stderr
        model = load_model(args.model)
        hw = get_hardware(args.hardware)
        work = workload_from_args(args)
        layouts = [(name, parse_layout(name)) for name in args.layout.split(",")]
    except (KeyError, ValueError, OSError) as exc:
        print(f"sglang-mx roofline: {str(exc).strip(chr(39) + chr(34))}", file=sys.stderr)
        return 2
    args.input_len, args.output_len, args.hit_rate = work.input_len, work.output_len, work.hit_rate
    prec = precision_from_args(args)
    rows = []
    for name, layout in layouts:
        lim = limits(model, hw, layout, work, prec, args.concurrency, args.reserve)
        row = {"layout": name, **lim.to_dict()}
        if args.measured:
            row["measured_output_tok_s"] = args.measured
            row["measured_over_limit"] = (
                args.measured / lim.output_tok_s if lim.output_tok_s else float("nan")
            )
        rows.append(row)
    if args.json:
        print(
            json.dumps(
                {
                    "model": model.name,
                    "hardware": hw.name,
                    "workload": vars(args) | {"func": None},
                    "rows": rows,
                },
                indent=1,
                default=str,
            )
        )
        return 0
    print(
        f"{model.name}: {model.total_params / 1e9:.1f}B params, "
        f"{model.active_linear_params / 1e9:.1f}B active; {hw.name} x{hw.gpus_per_node}; "
        f"{args.input_len} in / {args.output_len} out / {args.hit_rate:.0%} hit"
    )
    head = [
        "layout",
        "GB w/GPU",
        "max conc",
        "conc",
        "prefill ms/req",
        "step ms",
        "out tok/s",
        "req/s",
        "bound",
    ]
    if args.measured:
        head.append("measured/limit")
    print(" | ".join(head))
    for r in rows:
        cells = [
            r["layout"],
            f"{r['weight_bytes_per_gpu'] / 1e9:.1f}",
            str(r["max_concurrency"]),
            str(r["concurrency"]),
            f"{r['prefill_s_per_request'] * 1e3:.1f}",
            f"{r['decode_step_s'] * 1e3:.2f}",
            f"{r['output_tok_s']:,.0f}",
            f"{r['req_s']:.2f}",
            r["bound"],
        ]
        if args.measured:
            cells.append(f"{r['measured_over_limit']:.1%}")
        print(" | ".join(cells))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("roofline", help="capacity/roofline model for a node")
    p.add_argument("--model", default="glm-5.2", help="glm-5.2, a config.json or a model dir")
    add_hardware_args(p, "MI355X", None, with_gpus=False)
    add_layout_arg(p, DEFAULT_LAYOUTS)
    add_workload_arg(p, "production-20k-1k-60")
    add_shape_args(p)
    add_concurrency_arg(p)
    add_precision_args(p)
    p.add_argument("--measured", type=float, help="measured output tok/s per node")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run)
