"""One way to add an attention backend of ours to SGLang 0.5.23: its attention registry and the
CLI choices of --attention-backend, after checking the SGLang version the backend was written
against (each backend module lists the SGLang privates it reads in its docstring)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sglang_mx.sglang_version import check_version


def register_backend(name: str, module: str, create: Callable[[Any], Any]) -> None:
    """Register `create(model_runner) -> backend` under `name`. Idempotent."""
    from sglang.srt.arg_groups.choices import (
        ATTENTION_BACKEND_CHOICES,
        add_attention_backend_choices,
    )
    from sglang.srt.layers.attention.attention_registry import (
        ATTENTION_BACKENDS,
        register_attention_backend,
    )

    check_version(module)
    if name not in ATTENTION_BACKEND_CHOICES:
        add_attention_backend_choices([name])
    if name not in ATTENTION_BACKENDS:
        register_attention_backend(name)(create)
