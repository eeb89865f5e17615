"""General SGLang plugin (`sglang.srt.plugins` entry point), run by `load_plugins()` in every
SGLang process: main, tokenizer, scheduler, detokenizer.

Each hook into SGLang lives with its concern; `register()` only wires them, in this order:
(1) a CPU-only box is made ready for SGLang's CPU engine (`cpu_setup`), or a CUDA GPU without
sgl_kernel for the `mx_cuda` platform (`cuda_setup`), (2) the request guards (`guards.hooks`),
(3) on our platforms, what DSA models need there (`attention.dsa.cpu`); on a CPU box, what EAGLE
(MTP) speculative decoding needs there (`seam.spec_cpu`) and SGLang's bf16 MoE under expert
parallelism (`seam.moe_native_ep`), and PD disaggregation's prefill side over Mooncake TCP
(`seam.pd_cpu`); on mx_cuda, torch in place of two JIT
CUDA kernels (`cuda_hooks`), (4) the `mx_triton` and `mx_dsa` attention backends, (5) the
checkpoint check before SGLang loads weights (`checkpoint`), (6) on a GPU node with SGLang's
in-tree platform, the MXFP4 MoE takeover (`quant.takeover`).
"""

from __future__ import annotations

from sglang_mx.env import ENV
from sglang_mx.platform_choice import cuda_native_wanted
from sglang_mx.quant.moe_dispatch import moe_dispatch
from sglang_mx.sglang_version import check_version

_registered = False


def register() -> None:
    global _registered
    if _registered or ENV.disabled:
        return
    _registered = True
    cpu_box = ENV.platform_wanted()
    cuda_native = not cpu_box and cuda_native_wanted()
    if cpu_box:
        from sglang_mx.seam import cpu_setup

        cpu_setup.prepare_process()
    elif cuda_native:
        from sglang_mx.seam import cuda_setup

        cuda_setup.prepare_process()
    from sglang_mx.attention import registry
    from sglang_mx.attention.dsa import cpu as dsa_cpu
    from sglang_mx.guards import hooks as guard_hooks
    from sglang_mx.quant import checkpoint

    check_version()
    if ENV.guards:
        guard_hooks.register()
    if cpu_box or cuda_native:
        dsa_cpu.register()
    if cpu_box:
        from sglang_mx.seam import moe_native_ep, pd_cpu, spec_cpu

        spec_cpu.register()
        moe_native_ep.register()
        pd_cpu.register()
    if cuda_native:
        from sglang_mx.seam import cuda_hooks

        cuda_hooks.register()
    registry.register()
    checkpoint.register_load_check()
    if not (cpu_box or cuda_native) and moe_dispatch().owner == "sglang_mx":
        from sglang_mx.quant import takeover

        takeover.register()
