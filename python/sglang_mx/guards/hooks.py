"""The request guards' hooks into SGLang 0.5.23 (`register()`, called by the plugin).

SGLang 0.5.23 sends token ids and counts to the scheduler unchecked against the vocabulary (an
out-of-vocabulary prompt id, top_logprobs_num > vocab, top_k >= 2**31 or an out-of-vocabulary
stop_token_id with min_new_tokens kills the scheduler, and with it the server).
`TokenizerManager._validate_one_request(obj, input_ids)` is the one private method every
generate/embedding request passes through (single, batched and parallel-sampled, /generate and
OpenAI routes) after tokenization and before it is sent; a ValueError raised there becomes a 400
on every route. Hooked BEFORE, not replaced: SGLang's own checks still run after ours.

In the HTTP server's process only (where `launch_server` runs; importing http_server in the
scheduler processes would cost their start-up): `/get_model_info` (which calls the module-level
`model_info` at request time) also reports `vocab_size` and `context_length`, so the provider
can apply the same limits; and `launch_server` installs the HTTP guards (`http_app.py`:
non-object JSON bodies, which 0.5.23 answers with a 500 on /v1/chat/completions, and validation
messages without source paths) on `http_server.app`, whose middleware and exception handlers are
its public FastAPI attributes.
"""

from __future__ import annotations

import multiprocessing

from sglang_mx.guards.checks import ModelLimits, check_generate, check_generate_shape
from sglang_mx.sglang_version import hook


def guard_one_request(manager, obj, input_ids, *args, **kwargs):
    """BEFORE hook on TokenizerManager._validate_one_request: the model's limits from the
    tokenizer manager, then every guarded field of `obj` against them."""
    limits = ModelLimits(manager.model_config.vocab_size, manager.context_len)
    check_generate(obj, input_ids, limits)
    return None


def guard_generate_shape(obj, *args, **kwargs):
    """BEFORE hook on GenerateReqInput.normalize_batch_and_arguments."""
    check_generate_shape(obj)
    return None


async def model_info_with_limits(original, *args, **kwargs):
    """AROUND hook on http_server.model_info: add the facts a front-end validates against."""
    from sglang.srt.entrypoints import http_server

    info = await original(*args, **kwargs)
    if isinstance(info, dict):
        manager = http_server._global_state.tokenizer_manager
        info["vocab_size"] = manager.model_config.vocab_size
        info["context_length"] = manager.context_len
    return info


def install_http_guards(*args, **kwargs):
    """BEFORE hook on http_server.launch_server: the app is built, not yet started."""
    from fastapi.exceptions import RequestValidationError
    from sglang.srt.entrypoints import http_server

    from sglang_mx.guards.http_app import JsonObjectGuard, scrubbed_validation_handler

    app = http_server.app
    if not getattr(app.state, "sglang_mx_http_guards", False):
        app.state.sglang_mx_http_guards = True
        app.add_middleware(JsonObjectGuard)
        original = app.exception_handlers[RequestValidationError]
        app.exception_handlers[RequestValidationError] = scrubbed_validation_handler(original)
    return None


def register() -> None:
    hook(
        "sglang.srt.managers.tokenizer_manager.TokenizerManager._validate_one_request",
        guard_one_request,
        "BEFORE",
    )
    # normalize_batch_and_arguments runs first of all, in generate_request; its ValueErrors are
    # 400s too, but it indexes `sampling_params` and compares `n` before checking them.
    hook(
        "sglang.srt.managers.io_struct.GenerateReqInput.normalize_batch_and_arguments",
        guard_generate_shape,
        "BEFORE",
    )
    if multiprocessing.parent_process() is not None:
        return
    hook("sglang.srt.entrypoints.http_server.model_info", model_info_with_limits, "AROUND")
    hook("sglang.srt.entrypoints.http_server.launch_server", install_http_guards, "BEFORE")
