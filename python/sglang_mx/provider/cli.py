"""`sglang-mx provider`: run the provider endpoint in front of an SGLang server or router."""

from __future__ import annotations

import argparse
import dataclasses
import importlib

from sglang_mx.provider.settings import KEEPALIVE_FRAMES, ProviderSettings

# Required to serve, but not to `provider keys`: checked in run() (argparse would ask for them
# before the keys action too). flag name -> help
REQUIRED_TO_SERVE = {
    "upstream": "SGLang server or router URL (required)",
    "pricing": "pricing JSON file or directory of them (required)",
    "db": "keys, ledger and limits: an SQLite file (one process), or a postgresql:// URL "
    "shared by several replicas (required)",
}
# The flags named as their ProviderSettings field (--read-timeout-s: read_timeout_s), in help
# order: default and type are the field's (a bool is a store_true switch); the add_argument
# keywords given here are the rest.
SETTING_FLAGS = {
    "host": {},
    "port": {},
    "isolation": {
        "choices": ("auto", "on", "off"),
        "help": "per-key prefix-cache namespaces (auto: when more than one key exists)",
    },
    "keepalive_s": {"help": "send a keep-alive after this many seconds of upstream silence"},
    "keepalive_frame": {
        "choices": KEEPALIVE_FRAMES,
        "help": "blank: an empty SSE line, skipped by every client (default); comment: "
        "OpenRouter's ': PROCESSING', which line-based clients such as SGLang's benchmark "
        "client fail on",
    },
    "health_ttl_s": {},
    "read_timeout_s": {},
    "ledger_flush_tokens": {
        "help": "streamed tokens between ledger progress writes (crash-billing granularity)"
    },
    "default_rpm": {},
    "default_tpm": {},
    "replica_lease_s": {
        "help": "PostgreSQL store: a replica silent this long is dead; its in-flight rows are "
        "settled by the others"
    },
    "db_sync_commit": {
        "help": "PostgreSQL store: wait for each commit's fsync (default: asynchronous commit, "
        "like SQLite's synchronous=NORMAL)"
    },
    "log_level": {},
}
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
    for name, help_ in REQUIRED_TO_SERVE.items():
        p.add_argument(f"--{name}", help=help_)
    defaults = {f.name: f.default for f in dataclasses.fields(ProviderSettings)}
    for name, extra in SETTING_FLAGS.items():
        p.add_argument("--" + name.replace("_", "-"), **_from_default(defaults[name]), **extra)
    p.set_defaults(func=run, provider_parser=p)
    actions = p.add_subparsers(dest="provider_command", metavar="[keys|db]")
    for module in ACTIONS.values():
        importlib.import_module(module).register(actions)


def _from_default(default) -> dict:
    """add_argument keywords of a flag whose default is `default`: a switch for a bool, else
    that default converted by its type (none for a str, argparse's own)."""
    if isinstance(default, bool):
        return {"action": "store_true"}
    return {"default": default} | ({} if isinstance(default, str) else {"type": type(default)})


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
