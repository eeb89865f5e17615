"""`sglang-mx bench agents`: the frontend-DSL agent programs (bench/agents/) through
`sgl.RuntimeEndpoint`, against the provider (cached-token ratio and billed cost per run) or
SGLang directly."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sglang_mx.bench.cli.args import api_key_arg, url_arg

AGENT_PROGRAMS = ("tool_agent", "review_forkjoin", "multiturn_chat")
# Over the OpenAI chat route with tools (needs the server's --tool-call-parser); not in "all".
TOOL_PROGRAMS = ("tool_calls",)
TOOL_TURN_TOKENS = 128  # a turn holds reasoning and a call: at least this many tokens


def _cmd_agents(args) -> int:
    """The DSL agent programs through `sgl.RuntimeEndpoint`: against the provider with
    --api-key (cached-token ratio and billed cost per program run), or SGLang directly."""
    import importlib

    from sglang_mx.bench.agents.common import run_via_provider

    names = AGENT_PROGRAMS if args.program == "all" else (args.program,)
    kwargs = {"max_tokens": args.max_tokens}
    if args.context_chars:
        kwargs["context_chars"] = args.context_chars
    rows = []
    for name in names:
        module = importlib.import_module(f"sglang_mx.bench.agents.{name}")
        if name in TOOL_PROGRAMS:
            rows.append(module.run(args.url.rstrip("/"), args.api_key, args.sessions,
                                   max(args.max_tokens, TOOL_TURN_TOKENS)))  # fmt: skip
            continue
        func = getattr(module, {"review_forkjoin": "review", "multiturn_chat": "chat"}.get(
            name, name))  # fmt: skip
        if args.api_key:
            res = run_via_provider(
                func, args.url.rstrip("/"), args.api_key, args.sessions, **kwargs
            )
        else:  # SGLang itself: same report, no cost (nothing is billed), cache flushed first
            from sglang_mx.bench.agents.common import run_program

            meter, wall = run_program(func, args.url.rstrip("/"), args.sessions, True, **kwargs)
            res = {"program": name, "sessions": args.sessions, "calls": len(meter.calls),
                   "prompt_tokens": meter.prompt_tokens, "cached_tokens": meter.cached_tokens,
                   "completion_tokens": sum(c.completion_tokens for c in meter.calls),
                   "cached_ratio": meter.hit_rate, "cost_usd": None, "cost_usd_per_run": None,
                   "wall_s": wall, "meter": meter}  # fmt: skip
        res.pop("meter")
        res["program"] = name
        rows.append(res)
    print("| program | runs | calls | prompt tok | cached tok | cached ratio | USD per run |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        usd = "-" if r["cost_usd_per_run"] is None else f"{r['cost_usd_per_run']:.8f}"
        print(f"| {r['program']} | {r['sessions']} | {r['calls']} | {r['prompt_tokens']} | "
              f"{r['cached_tokens']} | {r['cached_ratio']:.3f} | {usd} |")  # fmt: skip
    if args.out:
        from sglang_mx.measure.stamp import stamp

        config = {"url": args.url, "via_provider": bool(args.api_key), "sessions": args.sessions,
                  "max_tokens": args.max_tokens, "context_chars": args.context_chars}  # fmt: skip
        if args.api_key:  # the prices the costs were billed at
            import httpx

            listed = httpx.get(args.url.rstrip("/") + "/v1/models", params={"format": "legacy"})
            config["pricing"] = {m["id"]: m["pricing"] for m in listed.json()["data"]}
        out = {"stamp": stamp(None, config), "programs": rows}
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "agents",
        help="run the frontend-language agent programs (sgl.RuntimeEndpoint); with --api-key "
        "through the provider, reporting cached-token ratio and cost per program run",
    )
    url_arg(p)
    api_key_arg(p)
    p.add_argument(
        "--program",
        choices=("all", *AGENT_PROGRAMS, *TOOL_PROGRAMS),
        default="all",
        help="all: the frontend-language programs; tool_calls: OpenAI tool calls in a loop "
        "(the server needs --tool-call-parser glm47 --reasoning-parser glm45)",
    )
    p.add_argument("--sessions", type=int, default=2, help="program runs (concurrent)")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=8,
        help=f"tokens per gen() call (tool_calls: per turn, at least {TOOL_TURN_TOKENS})",
    )
    p.add_argument("--context-chars", type=int, help="shared context length (program default)")
    p.add_argument("-o", "--out", help="also write the results as JSON here")
    p.set_defaults(func=_cmd_agents)
