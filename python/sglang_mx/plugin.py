"""General SGLang plugin (`sglang.srt.plugins` entry point), run by `load_plugins()` in every
SGLang process: main, tokenizer, scheduler, detokenizer.

It (1) prepares a CPU-only box so SGLang's CPU engine imports cleanly, (2) registers the MXFP4
quantization method and the `mx_triton` attention backend, and (3) installs the few patches of
SGLang privates that have no public hook (all in `sglang_mx.patches`).
"""

from __future__ import annotations

import logging

from sglang_mx.env import ENV

logger = logging.getLogger(__name__)
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

    patches.apply()
    attention_backend.register()
