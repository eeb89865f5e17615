"""General SGLang plugin (`sglang.srt.plugins` entry point), run by `load_plugins()` in every
SGLang process: main, tokenizer, scheduler, detokenizer.

It (1) prepares a CPU-only box so SGLang's CPU engine imports cleanly, (2) registers the MXFP4
quantization method and the `mx_triton` attention backend, and (3) installs the few patches of
SGLang privates that have no public hook (all in `sglang_mx.patches`).
"""

from __future__ import annotations

from sglang_mx.env import ENV
from sglang_mx.moe_dispatch import moe_dispatch

_registered = False


def register() -> None:
    global _registered
    if _registered or ENV.disabled:
        return
    _registered = True
    if ENV.platform_wanted():
        from sglang_mx import cpu_setup

        cpu_setup.prepare_process()
    from sglang_mx import patches
    from sglang_mx.attention import backend as attention_backend
    from sglang_mx.attention import mla_backend

    patches.apply()
    attention_backend.register()
    mla_backend.register()
    _register_checkpoint_check()
    if not ENV.platform_wanted() and moe_dispatch().owner == "sglang_mx":
        _route_gpu_mxfp4_moe()


def _validate_before_load(loader, *args, **kwargs):
    """BEFORE hook on SGLang's model loader: check local checkpoints before reading weights."""
    import os

    from sglang_mx.checkpoint import validate_checkpoint

    model_config = kwargs.get("model_config")
    path = getattr(model_config, "model_path", None)
    if path and os.path.isdir(path):
        validate_checkpoint(path, serves_linears=ENV.platform_wanted())
    return None


def _register_checkpoint_check() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(
        "sglang.srt.model_loader.loader.DefaultModelLoader.load_model",
        _validate_before_load,
        HookType.BEFORE,
    )


def _route_gpu_mxfp4_moe() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from sglang_mx.quant import takeover

    HookRegistry.register(
        "sglang.srt.layers.quantization.mxfp4.Mxfp4Config.from_config",
        takeover.remember_raw_config,
        HookType.AROUND,
    )
    for target in (
        "sglang.srt.layers.quantization.mxfp4.Mxfp4Config.get_quant_method",
        "sglang.srt.layers.quantization.quark.quark.QuarkConfig.get_quant_method",
    ):
        HookRegistry.register(target, takeover.take_moe_layer, HookType.AROUND)
