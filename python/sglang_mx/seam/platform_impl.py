"""The `mx_cpu` platform class (imported only once `sglang_mx.seam.platform.activate` claims it)."""

from __future__ import annotations

from sglang.srt.platforms.cpu import CpuDeviceMixin
from sglang.srt.platforms.device_mixin import PlatformEnum
from sglang.srt.platforms.interface import PlatformCapabilities, SRTPlatform

from sglang_mx.env import ENV

DEFAULT_MAX_TOTAL_TOKENS = 131072
# EAGLE is SGLang's NextN/MTP path (NEXTN is rewritten to EAGLE before the platform is asked); its
# target-verify and draft-extend forwards run through our attention backends (mx_dsa, mx_triton).
SPECULATIVE_ALGORITHMS = ("EAGLE", "NEXTN")
DRAFT_ATTENTION_BACKENDS = ("mx_dsa", "mx_triton", "torch_native")


class MxCpuPlatform(CpuDeviceMixin, SRTPlatform):
    """CPU device ops from SGLang's own CPU mixin; out-of-tree so its hooks are consulted."""

    _enum = PlatformEnum.OOT
    device_name = "cpu"
    device_type = "cpu"
    capabilities = PlatformCapabilities(graph_capture=False)

    def is_pin_memory_available(self, device=None) -> bool:
        return False

    def post_load_model(self, model) -> None:
        # Before the tree cache builds HiCache's host pools: their transfer ops and host
        # allocator for a CPU (seam/hicache_cpu.py).
        from sglang_mx.seam import hicache_cpu

        hicache_cpu.bind()

    def apply_server_args_defaults(self, server_args) -> None:
        # Only fields the user left unset: an explicit flag always wins.
        server_args.device = "cpu"
        if server_args.sampling_backend is None:
            server_args.sampling_backend = "pytorch"
        if server_args.max_total_tokens is None:
            # SGLang sizes the KV pool from free host RAM (millions of tokens, ~60 s to allocate
            # on 2 cores); a development box needs far less.
            server_args.max_total_tokens = DEFAULT_MAX_TOTAL_TOKENS
        # More ranks than NUMA nodes (--tp 2 on a 2-core box): one core group per rank, or a
        # one-line refusal, instead of SGLang's assertion in every scheduler.
        from sglang_mx.seam import cpu_binding

        cpu_binding.apply(server_args)
        if getattr(server_args, "boundary_reduction", None) == "auto":
            # DP attention with EP would return the FFN output by reduce_scatterv, which needs
            # pynccl; gloo (the CPU's collectives) has none. All-reduce + DP scatter instead.
            server_args.boundary_reduction = "ar"
        if not ENV.busy_poll:
            # An idle scheduler otherwise spins on its sockets and holds a core; on a 2-core box
            # the tokenizer, detokenizer, clients and the provider queue behind it. Sleeping on
            # the sockets (zmq poll) wakes on the first message.
            server_args.sleep_on_idle = True

    def get_default_attention_backend(self) -> str:
        return "torch_native"

    def get_compile_backend(self, mode: str | None = None) -> str:
        return "eager"

    def get_dispatch_key_name(self) -> str:
        # "cpu" would select forward_cpu methods, which call torch.ops.sgl_kernel (AMX builds).
        return "native"

    def supports_speculative_algorithm(self, algorithm: str) -> bool:
        return str(algorithm).upper() in SPECULATIVE_ALGORITHMS

    def supports_speculative_draft_attention_backend(self, algorithm: str, backend: str) -> bool:
        return self.supports_speculative_algorithm(algorithm) and backend in (
            DRAFT_ATTENTION_BACKENDS
        )

    def get_default_speculative_draft_attention_backend(self, algorithm: str) -> str:
        return "torch_native"

    def get_quantization_config(self, quantization: str):
        from sglang_mx.quant import quantization_config_for

        return quantization_config_for(quantization)
