"""Whether a flag list is one the real parsers take: SGLang's own server parser (ServerArgs, with
our attention backends among its choices as the plugin adds them) and SGLang Model Gateway's (`smg`
1.13, formerly sglang-router: its own `RouterArgs`, the parser `smg launch` builds). A recipe
whose flag was renamed, removed or given a value outside its choices fails here, on any box,
before a node is booked. Parsing only: no server, no model, no GPU."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import cache


class _Parser(argparse.ArgumentParser):
    """Says what it refused instead of exiting (a retired flag's action calls `error`)."""

    def __init__(self) -> None:
        # No abbreviations: `--tp` for `--tp-size` parses today and breaks once a flag is added.
        super().__init__(add_help=False, allow_abbrev=False, exit_on_error=False)

    def error(self, message: str):  # type: ignore[override]
        raise argparse.ArgumentError(None, message)


@cache
def _sglang() -> argparse.ArgumentParser:
    from sglang.srt.arg_groups.choices import (
        ATTENTION_BACKEND_CHOICES,
        add_attention_backend_choices,
    )
    from sglang.srt.server_args import ServerArgs

    from sglang_mx.attention.registry import MX_DSA, MX_TRITON

    # What attention/registry.py adds at plugin load, without registering the backends.
    add_attention_backend_choices(
        [n for n in (MX_TRITON, MX_DSA) if n not in ATTENTION_BACKEND_CHOICES]
    )
    parser = _Parser()
    ServerArgs.add_cli_args(parser)
    return parser


@cache
def _router() -> argparse.ArgumentParser:
    from smg.router_args import RouterArgs

    parser = _Parser()
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser


def _parse(parser: argparse.ArgumentParser, args: Sequence[str]) -> tuple[object, str | None]:
    try:
        ns, unknown = parser.parse_known_args(list(args))
    except argparse.ArgumentError as e:
        return None, str(e)
    return ns, (f"unrecognized arguments: {' '.join(unknown)}" if unknown else None)


def deprecated_flags(args: Sequence[str]) -> list[str]:
    """The flags in `args` SGLang still takes but has retired (its `Deprecated*` actions warn
    and translate them), so a recipe can move off them before they go."""
    flags = {
        opt
        for action in _sglang()._actions
        if type(action).__name__.startswith("Deprecated")
        for opt in action.option_strings
    }
    return sorted({a for a in args if a in flags})


def server_flag_error(args: Sequence[str]) -> str | None:
    """None when SGLang's server parser takes `args` (a model path is supplied), else why not."""
    return _parse(_sglang(), ["--model-path", "/ckpt", *args])[1]


def router_flag_error(args: Sequence[str]) -> str | None:
    """None when `smg launch` would take `args`, else why not."""
    from smg.router_args import RouterArgs

    ns, error = _parse(_router(), args)
    if error is None:
        try:  # parses the --prefill URL [BOOTSTRAP_PORT] pairs, as launch_router does
            RouterArgs.from_cli_args(ns, use_router_prefix=False)
        except ValueError as e:
            return str(e)
    return error
