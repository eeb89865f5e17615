"""Every patch of an SGLang private, in one place. Each says why, and asserts the version it was
written against: a different SGLang must fail loudly here, not misbehave later."""

from __future__ import annotations

SGLANG_VERSION = "0.5.23"


def check_version() -> None:
    import sglang

    if sglang.__version__ != SGLANG_VERSION:
        raise RuntimeError(
            f"sglang_mx patches were written for sglang {SGLANG_VERSION}, found "
            f"{sglang.__version__}; review sglang_mx/patches.py before using this version"
        )


def refresh_is_cpu_cache() -> None:
    """`sglang.srt.utils.common.is_cpu` is lru-cached and `python -m sglang.launch_server`
    imports modules that call it before `load_plugins()` runs, so it can have cached False
    before we set SGLANG_USE_CPU_ENGINE=1. Clearing the cache makes later callers (device
    selection, model layers) see the CPU engine."""
    check_version()
    from sglang.srt.utils import common

    fn = common.is_cpu
    assert hasattr(fn, "cache_clear"), "sglang 0.5.23 caches is_cpu with lru_cache"
    fn.cache_clear()


def _guard_one_request(manager, obj, input_ids, *args, **kwargs):
    """BEFORE hook on TokenizerManager._validate_one_request (see guard_request_validation)."""
    from sglang_mx.guards import ModelLimits, check_generate

    limits = ModelLimits(manager.model_config.vocab_size, manager.context_len)
    check_generate(obj, input_ids, limits)
    return None


def _guard_generate_shape(obj, *args, **kwargs):
    """BEFORE hook on GenerateReqInput.normalize_batch_and_arguments."""
    from sglang_mx.guards import check_generate_shape

    check_generate_shape(obj)
    return None


async def _model_info_with_limits(original, *args, **kwargs):
    """AROUND hook on http_server.model_info: add the facts a front-end validates against."""
    from sglang.srt.entrypoints import http_server

    info = await original(*args, **kwargs)
    if isinstance(info, dict):
        manager = http_server._global_state.tokenizer_manager
        info["vocab_size"] = manager.model_config.vocab_size
        info["context_length"] = manager.context_len
    return info


def _install_http_guards(*args, **kwargs):
    """BEFORE hook on http_server.launch_server: the app is built, not yet started."""
    from fastapi.exceptions import RequestValidationError
    from sglang.srt.entrypoints import http_server

    from sglang_mx.http_guards import JsonObjectGuard, scrubbed_validation_handler

    app = http_server.app
    if not getattr(app.state, "sglang_mx_http_guards", False):
        app.state.sglang_mx_http_guards = True
        app.add_middleware(JsonObjectGuard)
        original = app.exception_handlers[RequestValidationError]
        app.exception_handlers[RequestValidationError] = scrubbed_validation_handler(original)
    return None


def guard_request_validation() -> None:
    """SGLang 0.5.23 sends token ids and counts to the scheduler unchecked against the
    vocabulary (an out-of-vocabulary prompt id, top_logprobs_num > vocab, top_k >= 2**31 or an
    out-of-vocabulary stop_token_id with min_new_tokens kills the scheduler, and with it the
    server). `TokenizerManager._validate_one_request(obj, input_ids)` is the one private method
    every generate/embedding request passes through (single, batched and parallel-sampled,
    /generate and OpenAI routes) after tokenization and before it is sent; a ValueError raised
    there becomes a 400 on every route. Hooked BEFORE, not replaced: SGLang's own checks still
    run after ours.

    In the HTTP server's process only (where `launch_server` runs; importing http_server in the
    scheduler processes would cost their start-up): `/get_model_info` (which calls the
    module-level `model_info` at request time) also reports `vocab_size` and `context_length`,
    so the provider can apply the same limits; and `launch_server` installs the HTTP guards
    (`http_guards.py`: non-object JSON bodies, which 0.5.23 answers with a 500 on
    /v1/chat/completions, and validation messages without source paths) on `http_server.app`,
    whose middleware and exception handlers are its public FastAPI attributes."""
    import multiprocessing

    check_version()
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(
        "sglang.srt.managers.tokenizer_manager.TokenizerManager._validate_one_request",
        _guard_one_request,
        HookType.BEFORE,
    )
    # normalize_batch_and_arguments runs first of all, in generate_request; its ValueErrors are
    # 400s too, but it indexes `sampling_params` and compares `n` before checking them.
    HookRegistry.register(
        "sglang.srt.managers.io_struct.GenerateReqInput.normalize_batch_and_arguments",
        _guard_generate_shape,
        HookType.BEFORE,
    )
    if multiprocessing.parent_process() is not None:
        return
    HookRegistry.register(
        "sglang.srt.entrypoints.http_server.model_info",
        _model_info_with_limits,
        HookType.AROUND,
    )
    HookRegistry.register(
        "sglang.srt.entrypoints.http_server.launch_server",
        _install_http_guards,
        HookType.BEFORE,
    )


def _no_cuda_capability(original, server_args, *args, **kwargs):
    """AROUND hook on model_hook.handle_model_specific_adjustments (see cpu_dsa_arg_resolution)."""
    import torch
    from sglang.srt.arg_groups.overrides import declare_resolution, resolving_view

    if torch.cuda.is_available():
        return original(server_args, *args, **kwargs)
    kv_auto = resolving_view(server_args).kv_cache_dtype == "auto"
    probe = torch.cuda.get_device_capability
    torch.cuda.get_device_capability = lambda *a, **k: (0, 0)
    try:
        result = original(server_args, *args, **kwargs)
    finally:
        torch.cuda.get_device_capability = probe
    if kv_auto and resolving_view(server_args).kv_cache_dtype != "auto":
        declare_resolution(server_args, "sglang_mx_cpu_kv_dtype", kv_cache_dtype="auto")
    return result


def cpu_dsa_arg_resolution() -> None:
    """SGLang 0.5.23 resolves DSA server arguments (`arg_groups/model_hook.py`
    handle_model_specific_adjustments, and the `_dsa_kv_cache_dtype_default` /
    `_dsa_split_backend_resolution` passes it runs from `overrides.py`) with
    `torch.cuda.get_device_capability()` on every non-NPU/XPU platform, ours included; on a
    machine without CUDA that raises before the server starts. While that one function runs we
    answer (0, 0): "no tensor-core generation", which selects GPU DSA sub-backends our mx_dsa
    backend never calls. The same pass turns an unset --kv-cache-dtype into bfloat16 for DSA
    models, because SGLang's GPU MLA kernels read only bf16/FP8 latents; on the CPU engine we
    put "auto" (the model dtype) back, so `--dtype float32` means a float32 latent cache as for
    every other model. An explicit --kv-cache-dtype is left alone."""
    check_version()
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(
        "sglang.srt.arg_groups.model_hook.handle_model_specific_adjustments",
        _no_cuda_capability,
        HookType.AROUND,
    )


def _rope_cpu_any_type(
    original,
    head_size,
    rotary_dim,
    max_position,
    base,
    is_neox_style=True,
    rope_scaling=None,
    dtype=None,
    partial_rotary_factor=1.0,
    device=None,
):
    """AROUND hook on factory.get_rope_cpu (see cpu_rope_any_type)."""
    from sglang.srt.layers.rotary_embedding import factory

    kind = (rope_scaling or {}).get("rope_type", (rope_scaling or {}).get("type"))
    if kind == "deepseek_yarn":
        return original(
            head_size,
            rotary_dim,
            max_position,
            base,
            is_neox_style,
            rope_scaling,
            dtype,
            partial_rotary_factor,
            device,
        )
    return factory.get_rope(
        head_size,
        rotary_dim,
        max_position,
        base,
        is_neox_style,
        rope_scaling,
        dtype,
        partial_rotary_factor,
    )


def cpu_rope_any_type() -> None:
    """SGLang 0.5.23's CPU RoPE factory (`layers/rotary_embedding/factory.py` get_rope_cpu,
    reached from get_rope_wrapper whenever device == "cpu") asserts rope_scaling is a
    `deepseek_yarn` dict: plain RoPE (GLM-5's DSA indexer, rope_scaling None) fails to build.
    Other types go to the generic `get_rope`, whose RotaryEmbedding runs forward_native on CPU."""
    check_version()
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(
        "sglang.srt.layers.rotary_embedding.factory.get_rope_cpu",
        _rope_cpu_any_type,
        HookType.AROUND,
    )


def _dsa_backend_first(original, server_args, *args, **kwargs):
    """AROUND hook on platform_hook.handle_cpu_backends (see cpu_dsa_default_backend)."""
    from sglang.srt.arg_groups.overrides import declare_resolution, resolving_view

    from sglang_mx.attention.mla_backend import BACKEND_NAME, wants_mx_dsa

    cfg = resolving_view(server_args)
    unset = (
        cfg.attention_backend is None
        and cfg.prefill_attention_backend is None
        and cfg.decode_attention_backend is None
    )
    if cfg.device == "cpu" and unset and wants_mx_dsa(server_args):
        declare_resolution(server_args, "sglang_mx_dsa_default", attention_backend=BACKEND_NAME)
    return original(server_args, *args, **kwargs)


def cpu_dsa_default_backend() -> None:
    """SGLang 0.5.23 picks the attention backend for a CPU device in
    `arg_groups/platform_hook.py` handle_cpu_backends (intel_amx, falling back to torch_native,
    neither of which runs MLA) before any out-of-tree platform default is consulted, and its
    DSA default (`dsa`) is GPU kernels only. For a DSA checkpoint with no backend given we
    declare `mx_dsa` just before that function runs; an explicit --attention-backend wins."""
    check_version()
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(
        "sglang.srt.arg_groups.platform_hook.handle_cpu_backends",
        _dsa_backend_first,
        HookType.AROUND,
    )


def gpu_indexer_through_mx_dsa() -> None:
    """On an in-tree GPU platform (CUDA, or ROCm via the HIP -> CUDA fallback) SGLang 0.5.23
    dispatches the DSA `Indexer` to `forward_cuda` and never consults the out-of-tree forward
    registry; `forward_cuda` asks the attention backend for `get_indexer_metadata` and returns
    no top-k when it gets None -- which would silently make every mx_dsa layer dense. While the
    mx_dsa backend is the active one, route `Indexer.forward_cuda` to our indexer forward (its
    scoring then runs sgl_kernel_rocm's Triton indexer for decode); any other backend keeps
    SGLang's. Installed by the mx_dsa backend when it is created on a GPU."""
    check_version()
    from sglang.srt.layers.attention.dsa.dsa_indexer import Indexer

    original = Indexer.forward_cuda
    if getattr(original, "_sglang_mx_dsa", False):
        return

    def forward_cuda(self, *args, **kwargs):
        from sglang.srt.model_executor.forward_context import get_attn_backend

        from sglang_mx.attention.dsa_indexer import indexer_forward_native

        if hasattr(get_attn_backend(), "index_topk"):
            return indexer_forward_native(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    forward_cuda._sglang_mx_dsa = True
    Indexer.forward_cuda = forward_cuda


def apply() -> None:
    from sglang_mx.env import ENV

    check_version()
    if ENV.guards:
        guard_request_validation()
    if ENV.platform_wanted():
        cpu_dsa_arg_resolution()
        cpu_dsa_default_backend()
        cpu_rope_any_type()
