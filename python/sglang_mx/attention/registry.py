"""Our attention backends in SGLang 0.5.23's attention registry and the CLI choices of
--attention-backend, after checking the SGLang version they were written against (each backend
module lists the SGLang privates it reads in its docstring).

As SGLang's own registry does, the create functions import their backend module only when a
runner builds the backend: those modules import SGLang's attention and memory-pool classes,
which must not load in every process at plugin time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sglang_mx.attention.dsa.name import MX_DSA  # MLA + DeepSeek Sparse Attention (dsa/)
from sglang_mx.sglang_version import check_version, hook

MX_TRITON = "mx_triton"  # GQA/MHA decode on sgl_kernel_rocm's paged kernel (mx_triton.py)


def _create_mx_triton(runner: Any) -> Any:
    from sglang_mx.attention import mx_triton

    return mx_triton.create(runner)


def _create_mx_dsa(runner: Any) -> Any:
    from sglang_mx.attention.dsa import backend

    return backend.create(runner)


def register_backend(name: str, create: Callable[[Any], Any]) -> None:
    """Register `create(model_runner) -> backend` under `name`. Idempotent."""
    from sglang.srt.arg_groups.choices import (
        ATTENTION_BACKEND_CHOICES,
        add_attention_backend_choices,
    )
    from sglang.srt.layers.attention.attention_registry import (
        ATTENTION_BACKENDS,
        register_attention_backend,
    )

    check_version(f"sglang_mx attention backend {name}")
    if name not in ATTENTION_BACKEND_CHOICES:
        add_attention_backend_choices([name])
    if name not in ATTENTION_BACKENDS:
        register_attention_backend(name)(create)


def _draft_extend_backend(original, factory, *args, **kwargs):
    """AROUND `DraftBackendFactory.create_draft_extend_backend`: SGLang's EAGLE draft worker
    picks its draft-extend backend from a fixed map of its own backends; for ours it builds the
    same backend on the draft runner (the target-verify forward runs on the target's)."""
    from sglang.srt.runtime_context import attention_backends

    name = factory.draft_attn_backend or attention_backends()[0]
    if name not in (MX_TRITON, MX_DSA):
        return original(factory, *args, **kwargs)
    create = _create_mx_dsa if name == MX_DSA else _create_mx_triton
    backend = create(factory.draft_model_runner)
    backend.prefill_attention_backend_str = backend.decode_attention_backend_str = name
    return backend


def _draft_decode_backend(original, factory, *args, **kwargs):
    """AROUND `DraftBackendFactory.create_decode_backend`: one draft step (EAGLE with
    --speculative-num-steps 1) needs none; more steps get our per-step container
    (draft_steps.py: one backend of ours per step, chain drafts at topk 1)."""
    from sglang.srt.runtime_context import attention_backends

    name = factory.draft_attn_backend or attention_backends()[1]
    if name not in (MX_TRITON, MX_DSA) or factory.speculative_num_steps <= 1:
        return original(factory, *args, **kwargs)
    from sglang_mx.attention.draft_steps import MultiStepDraftBackend

    create = _create_mx_dsa if name == MX_DSA else _create_mx_triton
    return MultiStepDraftBackend(
        factory.draft_model_runner, create, factory.topk, factory.speculative_num_steps, name
    )


def register() -> None:
    """Register `mx_triton` and `mx_dsa`; the DeepSeek-family dispatch registry is told when a
    runner creates `mx_dsa`; EAGLE's draft worker builds them for its draft runner. Idempotent."""
    register_backend(MX_TRITON, _create_mx_triton)
    register_backend(MX_DSA, _create_mx_dsa)
    factory = "sglang.srt.speculative.draft_utils.DraftBackendFactory"
    hook(f"{factory}.create_draft_extend_backend", _draft_extend_backend, "AROUND")
    hook(f"{factory}.create_decode_backend", _draft_decode_backend, "AROUND")
