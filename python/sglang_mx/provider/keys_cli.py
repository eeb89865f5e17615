"""`sglang-mx provider keys create|list|revoke`: manage provider API keys (stored hashed).
`sglang-mx keys ...`, the earlier top-level spelling, works for one release (cli/main.py's
OLD_VERBS)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from sglang_mx.provider.action_parsers import action_group, store_action

HELP = "manage provider API keys"


def register(subparsers: argparse._SubParsersAction) -> None:
    group = action_group(subparsers, "keys", HELP)
    c = store_action(group, "create", "create a key; prints it once", _create)
    c.add_argument("--name", required=True)
    c.add_argument("--rpm", type=int, default=None, help="requests per minute (default: server's)")
    c.add_argument("--tpm", type=int, default=None, help="tokens per minute (default: server's)")
    c.add_argument("--limit-usd", type=float, default=None, help="spend cap (402 beyond it)")
    store_action(group, "list", "list keys (ids, never secrets) with spend", _list)
    r = store_action(group, "revoke", "revoke a key by id", _revoke)
    r.add_argument("key_id")


def _create(args: argparse.Namespace) -> int:
    from sglang_mx.provider.keys import KeyStore

    key, plain = KeyStore(args.db).create(args.name, args.rpm, args.tpm, args.limit_usd)
    print(f"id {key.id}  name {key.name}")
    print(plain)
    return 0


def _list(args: argparse.Namespace) -> int:
    from sglang_mx.provider.keys import KeyStore
    from sglang_mx.provider.ledger import Ledger

    ledger = Ledger(args.db)
    print(
        f"{'id':10} {'name':20} {'created':20} {'state':8} {'rpm':>6} {'tpm':>8} {'spend_usd':>12}"
    )
    for k in KeyStore(args.db).list():
        created = dt.datetime.fromtimestamp(k.created, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        state = "active" if k.active else "revoked"
        print(
            f"{k.id:10} {k.name[:20]:20} {created:20} {state:8} {k.rpm or '-':>6} "
            f"{k.tpm or '-':>8} {ledger.spend(k.id):12.6f}"
        )
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from sglang_mx.provider.keys import KeyStore

    if KeyStore(args.db).revoke(args.key_id):
        print(f"revoked {args.key_id}")
        return 0
    print(f"sglang-mx: error: no active key {args.key_id}", file=sys.stderr)
    return 1
