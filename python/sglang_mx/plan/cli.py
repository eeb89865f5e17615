"""`sglang-mx plan`: simulate SGLang 0.5.23 serving a model on a node layout over request rates
(or concurrencies); prints TTFT / ITL / E2E, throughput, goodput at the SLA, tok/s per GPU and
$/M tokens per point, the knee and the binding resource, beside the roofline limit."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from sglang_mx.capacity.flags import (
    add_hardware_args,
    add_layout_arg,
    add_page_size_arg,
    add_precision_args,
    add_requests_args,
    add_workload_arg,
)
from sglang_mx.measure.run_flags import add_slo_args, add_sweep_args


def parse_workload(text: str, num_requests: int | None, seed: int | None):
    """--workload NAME (capacity.workload.named_workload: a preset or IN-OUT-HIT like 20k-1k-60)
    with this run's request count and seed."""
    from sglang_mx.capacity.workload import named_workload

    return named_workload(text).with_overrides(num_requests=num_requests, seed=seed)


def build_deployment(args, layout):
    from sglang_mx.capacity.flags import precision_from_args
    from sglang_mx.capacity.hardware import get_hardware
    from sglang_mx.capacity.modelspec import load_model
    from sglang_mx.plan.efficiency import get_profile
    from sglang_mx.plan.links import get_link, link_for, scaleout_for
    from sglang_mx.plan.planner import Deployment
    from sglang_mx.plan.stepcost import Speculative

    hw = get_hardware(args.hardware)
    prec = precision_from_args(args)
    link = (
        None
        if args.link == "none"
        else (link_for(hw.name) if args.link == "auto" else get_link(args.link))
    )
    scaleout = (
        None
        if args.scaleout == "none"
        else (scaleout_for(hw.name) if args.scaleout == "auto" else get_link(args.scaleout))
    )
    sched = {
        "chunked_prefill_size": args.chunked_prefill_size,
        "max_running_requests": args.max_running_requests,
        "schedule_policy": args.schedule_policy,
        "page_size": args.page_size,
        "enable_mixed_chunk": args.enable_mixed_chunk or None,
        "disable_radix_cache": args.disable_radix_cache or None,
        "cuda_graph": False if args.disable_cuda_graph else None,
        "overlap_schedule": False if args.disable_overlap_schedule else None,
    }
    return Deployment(
        load_model(args.model),
        hw,
        layout,
        prec,
        get_profile(args.efficiency),
        link,
        {k: v for k, v in sched.items() if v is not None},
        Speculative(args.mtp_draft, args.mtp_accepted),
        args.reserve,
        scaleout,
    )


def _run(args: argparse.Namespace) -> int:
    from sglang_mx.measure.run_flags import slo_from_args, sweep_values
    from sglang_mx.measure.stamp import stamp
    from sglang_mx.plan.layouts import parse_plan_layout
    from sglang_mx.plan.planner import plan_sweep
    from sglang_mx.plan.records import Plan, best_at_sla
    from sglang_mx.plan.report import markdown, write_report

    try:
        kind, values = sweep_values(args)
        slo = slo_from_args(args)
        if args.mtp_accepted > args.mtp_draft:
            raise ValueError("--mtp-accepted cannot exceed --mtp-draft")
        spec = parse_workload(args.workload, args.num_requests, args.seed)
        layouts = [parse_plan_layout(x) for x in args.layout.split(",")]
        for lay in layouts:
            if lay.gpus != args.gpus:
                raise ValueError(f"layout {lay.name} uses {lay.gpus} GPUs, not --gpus {args.gpus}")
        deps = [build_deployment(args, lay) for lay in layouts]
    except (ValueError, KeyError, FileNotFoundError) as e:
        print(f"sglang-mx plan: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    sweeps = tuple(plan_sweep(dep, spec, kind, values, slo) for dep in deps)
    dep = deps[0]
    plan = Plan(
        stamp=stamp(f"{args.gpus}x {dep.hw.name} (simulated)", vars(args) | {"func": None}),
        model=dep.model.name,
        hardware=dep.hw.name,
        gpus=args.gpus,
        efficiency=args.efficiency,
        efficiency_sources=dep.eff.sources,
        link=dep.link.name if dep.link else "none",
        link_source=dep.link.source if dep.link else "not charged",
        scaleout=dep.scaleout.name if dep.scaleout else "none",
        scaleout_source=dep.scaleout.source if dep.scaleout else "PD KV over the link above",
        slo=dataclasses.asdict(slo) | {"text": slo.describe()},
        workload=spec.to_dict(),
        sweeps=sweeps,
        best=best_at_sla(sweeps),
    )
    if args.out:
        write_report(plan, args.out, plots=not args.no_plots)
    print(markdown(plan))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan", help="simulate SGLang serving a model on a layout: latency, throughput, $/token"
    )
    p.add_argument("--model", default="glm-5.2", help="glm-5.2, a config.json or a model dir")
    add_hardware_args(p, "MI355X", 8)
    add_layout_arg(p, "tp8,tp8-dpattn8")
    add_workload_arg(p, "production-20k-1k-60")
    add_requests_args(p)
    add_sweep_args(p)
    add_slo_args(p)
    p.add_argument(
        "--efficiency",
        default="production-assumed",
        help="sglang-mx-sm90-measured | production-assumed | ideal",
    )
    p.add_argument("--link", default="auto", help="auto (by hardware), none, or a links.json key")
    p.add_argument(
        "--scaleout",
        default="auto",
        help="NIC a pd: layout moves KV over: auto (by hardware), none, or a links.json key",
    )
    add_precision_args(p)
    p.add_argument("--chunked-prefill-size", type=int, help="default: SGLang's for the GPU")
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--schedule-policy", choices=("lpm", "fcfs"))
    add_page_size_arg(p, None)
    p.add_argument("--enable-mixed-chunk", action="store_true")
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--disable-overlap-schedule", action="store_true")
    p.add_argument("--mtp-draft", type=int, default=0, help="MTP draft tokens per step")
    p.add_argument("--mtp-accepted", type=float, default=0.0, help="mean accepted drafts")
    p.add_argument("-o", "--out", help="write plan.json, plan.md and plots here")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=_run)
