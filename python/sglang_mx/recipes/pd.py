"""Prefill/decode launch recipes (the "disaggregated" part of mi355x.json): one engine's SGLang
flags per role, the KV transfer backends the recipe allows (its own first), and the router's
flags in PD mode with the workers' URLs filled in. Rendered for scripts/launch/mi355x-1p1d.sh by
`sglang-mx recipe NAME --role ROLE` and for deploy/k8s/NAME/ by `recipes.k8s`.

A role is either written out (`args`) or taken `from` a single-node recipe with some flags
dropped (each with its reason) and the role's own appended, so "the decode node runs
mi355x-tp8-dpattn" stays true when that recipe changes."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.recipes.book import expand, load, takes_value

ROLES = ("prefill", "decode")
MODE = "--disaggregation-mode"
TRANSFER = "--disaggregation-transfer-backend"
BOOTSTRAP = "--disaggregation-bootstrap-port"
IB_DEVICE = "--disaggregation-ib-device"  # per cluster: the scripts and manifests append it


@dataclass(frozen=True)
class PdRecipe:
    name: str
    about: str
    gpus_per_node: int  # one engine per role, each a whole node
    roles: dict[str, tuple[str, ...]]  # role -> one engine's SGLang flags (no model, host, port)
    transfers: tuple[str, ...]  # KV transfer backends allowed, the recipe's own first
    router: tuple[str, ...]  # smg flags (no host, port or worker URLs)

    @property
    def bootstrap_port(self) -> int:
        """The prefill's KV bootstrap port, which the router hands to the decode per request."""
        args = self.roles["prefill"]
        return int(args[args.index(BOOTSTRAP) + 1])


def names() -> list[str]:
    return sorted(load().get("disaggregated", {}))


def without(args: tuple[str, ...], drop: dict[str, str]) -> list[str]:
    """`args` less each flag in `drop` (with its value, when it takes one)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        width = 2 if takes_value(args, i) else 1
        if args[i] not in drop:
            out += args[i : i + width]
        i += width
    return out


def _role(name: str, role: str, spec: dict) -> tuple[str, ...]:
    base: list[str] = []
    if "from" in spec:
        src = load()["recipes"][spec["from"]]["args"]
        base = without(expand(spec["from"], src), spec.get("drop", {}))
    args = expand(f"{name}:{role}", [*base, *spec["args"]])
    value = {f: args[args.index(f) + 1] for f in (MODE, TRANSFER) if f in args}
    if value.get(MODE) != role:
        raise ValueError(f"launch recipe {name!r}: role {role} must set {MODE} {role}")
    return args


def recipe(name: str) -> PdRecipe:
    recipes = load().get("disaggregated", {})
    if name not in recipes:
        raise KeyError(f"no prefill/decode recipe {name!r}; known: {', '.join(names())}")
    r = recipes[name]
    roles = {role: _role(name, role, r["roles"][role]) for role in ROLES}
    transfers = tuple(r["transfer"])
    for role, args in roles.items():
        if TRANSFER not in args or args[args.index(TRANSFER) + 1] != transfers[0]:
            raise ValueError(
                f"launch recipe {name!r}: role {role} must set {TRANSFER} {transfers[0]} "
                "(both roles move KV with the same backend, the first one the recipe allows)"
            )
    if BOOTSTRAP not in roles["prefill"]:
        raise ValueError(f"launch recipe {name!r}: the prefill role must set {BOOTSTRAP}")
    return PdRecipe(name, r["about"], int(r["gpus_per_node"]), roles, transfers, tuple(r["router"]))


def role_args(name: str, role: str, transfer: str | None = None) -> list[str]:
    """One role's flags for its node, with KV transfer backend `transfer` (default the
    recipe's own); --disaggregation-ib-device is the node's, appended by the caller."""
    r = recipe(name)
    if role not in r.roles:
        raise KeyError(f"recipe {name!r} has roles {', '.join(r.roles)} and router, not {role!r}")
    args = list(r.roles[role])
    if transfer is not None:
        if transfer not in r.transfers:
            allowed = ", ".join(r.transfers)
            raise ValueError(f"recipe {name!r} moves KV with {allowed}, not {transfer!r}")
        args[args.index(TRANSFER) + 1] = transfer
    return args


def router_args(name: str, prefill_url: str, decode_url: str) -> list[str]:
    """smg's flags in PD mode for one prefill and one decode worker."""
    r = recipe(name)
    return [*r.router, "--prefill", prefill_url, str(r.bootstrap_port), "--decode", decode_url]
