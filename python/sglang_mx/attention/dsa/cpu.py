"""What SGLang 0.5.23 lacks to serve a DSA model (GLM-5, DeepSeek-V3.2) on a CPU box: hooks on
its argument resolution and RoPE factory, and on the packed FP8 KV quantizer
(latent_cache.cpu_quantize_k_cache) (`register()`, called by the plugin when our CPU platform is
wanted, and on the mx_cuda platform, where only the KV-dtype rule applies: the others act on a
CPU device only). Each says why."""

from __future__ import annotations

from typing import Any

from sglang_mx.attention.dsa.name import MX_DSA
from sglang_mx.sglang_version import hook


def _no_cuda_capability(original, server_args, *args, **kwargs):
    """AROUND hook on model_hook.handle_model_specific_adjustments.

    SGLang 0.5.23 resolves DSA server arguments (`arg_groups/model_hook.py`
    handle_model_specific_adjustments, and the `_dsa_kv_cache_dtype_default` /
    `_dsa_split_backend_resolution` passes it runs from `overrides.py`) with
    `torch.cuda.get_device_capability()` on every non-NPU/XPU platform, ours included; on a
    machine without CUDA that raises before the server starts. While that one function runs we
    answer (0, 0): "no tensor-core generation", which selects GPU DSA sub-backends our mx_dsa
    backend never calls. The same pass turns an unset --kv-cache-dtype into bfloat16 for DSA
    models, because SGLang's GPU MLA kernels read only bf16/FP8 latents; on the CPU engine we
    put "auto" (the model dtype) back, so `--dtype float32` means a float32 latent cache as for
    every other model. An explicit --kv-cache-dtype is left alone."""
    import torch
    from sglang.srt.arg_groups.overrides import declare_resolution, resolving_view

    from sglang_mx.platform_choice import cuda_native_wanted

    on_gpu = torch.cuda.is_available()
    if on_gpu and not cuda_native_wanted():
        return original(server_args, *args, **kwargs)
    kv_auto = resolving_view(server_args).kv_cache_dtype == "auto"
    if on_gpu:
        # mx_cuda: the real capability, and the same "auto" latent dtype as on a CPU box (mx_dsa
        # reads any float latent; the bf16 rule is for SGLang's GPU MLA kernels).
        result = original(server_args, *args, **kwargs)
    else:
        probe = torch.cuda.get_device_capability
        torch.cuda.get_device_capability = lambda *a, **k: (0, 0)
        try:
            result = original(server_args, *args, **kwargs)
        finally:
            torch.cuda.get_device_capability = probe
    if kv_auto and resolving_view(server_args).kv_cache_dtype != "auto":
        declare_resolution(server_args, "sglang_mx_cpu_kv_dtype", kv_cache_dtype="auto")
    return result


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
    """AROUND hook on factory.get_rope_cpu.

    SGLang 0.5.23's CPU RoPE factory (`layers/rotary_embedding/factory.py` get_rope_cpu,
    reached from get_rope_wrapper whenever device == "cpu") asserts rope_scaling is a
    `deepseek_yarn` dict: plain RoPE (GLM-5's DSA indexer, rope_scaling None) fails to build.
    Other types go to the generic `get_rope`, whose RotaryEmbedding runs forward_native on CPU."""
    from sglang.srt.layers.rotary_embedding import factory

    kind = (rope_scaling or {}).get("rope_type", (rope_scaling or {}).get("type"))
    common = (head_size, rotary_dim, max_position, base, is_neox_style, rope_scaling, dtype)
    if kind == "deepseek_yarn":
        return original(*common, partial_rotary_factor, device)
    return factory.get_rope(*common, partial_rotary_factor)


def is_dsa_checkpoint(model_path: Any) -> bool:
    """A local checkpoint SGLang would serve with DSA: SGLang's own `is_deepseek_dsa` on its
    config.json (read directly: building SGLang's ModelConfig here would memoize it before
    argument resolution ends)."""
    import json
    from pathlib import Path

    from sglang.srt.configs.model_config import is_deepseek_dsa

    config = Path(str(model_path)) / "config.json"
    try:
        return bool(is_deepseek_dsa(json.loads(config.read_text())))
    except (OSError, ValueError):
        return False  # not a local checkpoint: SGLang reports what it cannot load


def wants_mx_dsa(server_args: Any) -> bool:
    """True for a local DSA checkpoint (`is_dsa_checkpoint`)."""
    from sglang.srt.arg_groups.overrides import resolving_view

    return is_dsa_checkpoint(resolving_view(server_args).model_path)


def _dsa_backend_first(original, server_args: Any, *args, **kwargs):
    """AROUND hook on platform_hook.handle_cpu_backends.

    SGLang 0.5.23 picks the attention backend for a CPU device in `arg_groups/platform_hook.py`
    handle_cpu_backends (intel_amx, falling back to torch_native, neither of which runs MLA)
    before any out-of-tree platform default is consulted, and its DSA default (`dsa`) is GPU
    kernels only. For a DSA checkpoint with no backend given we declare `mx_dsa` just before
    that function runs; an explicit --attention-backend wins."""
    from sglang.srt.arg_groups.overrides import declare_resolution, resolving_view

    cfg = resolving_view(server_args)
    unset = (
        cfg.attention_backend is None
        and cfg.prefill_attention_backend is None
        and cfg.decode_attention_backend is None
    )
    if cfg.device == "cpu" and unset and wants_mx_dsa(server_args):
        declare_resolution(server_args, "sglang_mx_dsa_default", attention_backend=MX_DSA)
    return original(server_args, *args, **kwargs)


def register() -> None:
    hook(
        "sglang.srt.arg_groups.model_hook.handle_model_specific_adjustments",
        _no_cuda_capability,
        "AROUND",
    )
    hook(
        "sglang.srt.arg_groups.platform_hook.handle_cpu_backends",
        _dsa_backend_first,
        "AROUND",
    )
    hook("sglang.srt.layers.rotary_embedding.factory.get_rope_cpu", _rope_cpu_any_type, "AROUND")
    from sglang_mx.attention.dsa import latent_cache

    hook(latent_cache.QUANTIZER, latent_cache.cpu_quantize_k_cache, "AROUND")
