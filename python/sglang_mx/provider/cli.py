"""`sglang-mx provider`: run the provider endpoint in front of an SGLang server or router."""

from __future__ import annotations

import argparse
import dataclasses
import importlib

from sglang_mx.provider.settings import KEEPALIVE_FRAMES

REQUIRED_TO_SERVE = ("upstream", "pricing", "db")
# `sglang-mx provider ACTION`: each module's register(subparsers) adds its parser and sets func
ACTIONS = {
    "keys": "sglang_mx.provider.keys_cli",
    "db": "sglang_mx.provider.db_cli",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "provider",
        help="run the OpenRouter-style provider endpoint",
        description="Serve priced, metered, authenticated OpenAI-compatible routes in front of "
        "an SGLang server or the smg gateway.",
    )
    # Required to serve, but not to `provider keys`: checked in run() (argparse would ask for
    # them before the keys action too).
    p.add_argument("--upstream", help="SGLang server or router URL (required)")
    p.add_argument("--pricing", help="pricing JSON file or directory of them (required)")
    p.add_argument(
        "--db",
        help="keys, ledger and limits: an SQLite file (one process), or a postgresql:// URL "
        "shared by several replicas (required)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument(
        "--isolation",
        choices=("auto", "on", "off"),
        default="auto",
        help="per-key prefix-cache namespaces (auto: when more than one key exists)",
    )
    p.add_argument(
        "--keepalive-s",
        type=float,
        default=2.0,
        help="send a keep-alive after this many seconds of upstream silence",
    )
    p.add_argument(
        "--keepalive-frame",
        choices=KEEPALIVE_FRAMES,
        default="blank",
        help="blank: an empty SSE line, skipped by every client (default); comment: "
        "OpenRouter's ': PROCESSING', which line-based clients such as SGLang's benchmark "
        "client fail on",
    )
    p.add_argument("--health-ttl-s", type=float, default=5.0)
    p.add_argument("--read-timeout-s", type=float, default=300.0)
    p.add_argument(
        "--ledger-flush-tokens",
        type=int,
        default=16,
        help="streamed tokens between ledger progress writes (crash-billing granularity)",
    )
    p.add_argument("--default-rpm", type=int, default=60)
    p.add_argument("--default-tpm", type=int, default=100_000)
    p.add_argument(
        "--replica-lease-s",
        type=float,
        default=10.0,
        help="PostgreSQL store: a replica silent this long is dead; its in-flight rows are "
        "settled by the others",
    )
    p.add_argument(
        "--db-sync-commit",
        action="store_true",
        help="PostgreSQL store: wait for each commit's fsync (default: asynchronous commit, "
        "like SQLite's synchronous=NORMAL)",
    )
    p.add_argument("--log-level", default="warning")
    p.set_defaults(func=run, provider_parser=p)
    actions = p.add_subparsers(dest="provider_command", metavar="[keys|db]")
    for module in ACTIONS.values():
        importlib.import_module(module).register(actions)


def run(args: argparse.Namespace) -> int:
    missing = [f"--{name}" for name in REQUIRED_TO_SERVE if getattr(args, name) is None]
    if missing:
        args.provider_parser.error(f"the following arguments are required: {', '.join(missing)}")
    import uvicorn

    from sglang_mx.provider.app import build_app
    from sglang_mx.provider.settings import ProviderSettings

    # Every flag named as its setting is passed as is; --pricing and --db name paths.
    names = {f.name for f in dataclasses.fields(ProviderSettings)}
    given = {k: v for k, v in vars(args).items() if k in names}
    settings = ProviderSettings(pricing_path=args.pricing, db_path=args.db, **given)
    uvicorn.run(
        build_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        # The C event loop and parser, explicitly: "auto" falls back silently to asyncio/h11.
        loop="uvloop",
        http="httptools",
        server_header=False,
        proxy_headers=False,  # nothing here reads the client address
    )
    return 0
