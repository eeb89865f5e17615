"""The `mx_cuda` platform class: SGLang 0.5.23 on a CUDA GPU without `sgl_kernel` or FlashInfer
(imported only once `sglang_mx.seam.platform.activate_cuda` claims the process).

SGLang's own scheduler, radix cache, paged KV pools and decode CUDA-graph runner run on the GPU;
what its in-tree CUDA platform would send to `sgl_kernel` goes elsewhere:
- custom ops (`BaseFusedOp`: RMSNorm, rotary, SiluAndMul, TopK, ...) dispatch to their
  `forward_native` torch paths (`get_dispatch_key_name`), or to forwards we register for
  "native" (the DSA indexer, `sglang_mx.attention.dsa.indexer`);
- attention: `mx_dsa` for MLA/DSA checkpoints, `mx_triton` (sgl_kernel_rocm's Triton kernels)
  for the rest; sampling on torch (`--sampling-backend pytorch`, not FlashInfer);
- MXFP4 MoE experts and linears: our quantization config (`get_quantization_config`);
- the radix tree: SGLang's Python TreeCore (its Rust one is a compiled extension built for
  SGLang's pinned torch), set by `cuda_setup.prepare_process`.

Every server argument it sets is a default (an explicit flag wins), except
--disable-custom-all-reduce: there is no custom all-reduce without sgl_kernel.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from sglang.srt.platforms.cuda import CudaDeviceMixin
from sglang.srt.platforms.device_mixin import PlatformEnum
from sglang.srt.platforms.interface import PlatformCapabilities, SRTPlatform

from sglang_mx.attention.dsa.cpu import is_dsa_checkpoint
from sglang_mx.attention.registry import MX_DSA, MX_TRITON

logger = logging.getLogger(__name__)
# Logged once per worker; scripts/gpu_serve_check.py reads it from the server log.
ACTIVE_LINE = "sglang_mx platform mx_cuda active"


def server_args_defaults(server_args: Any) -> dict[str, Any]:
    """The fields `mx_cuda` sets, for fields the user left unset."""
    out: dict[str, Any] = {}
    if server_args.device is None:
        out["device"] = "cuda"
    if server_args.sampling_backend is None:
        out["sampling_backend"] = "pytorch"  # SGLang's CUDA default is FlashInfer
    unset = (
        server_args.attention_backend is None
        and getattr(server_args, "prefill_attention_backend", None) is None
        and getattr(server_args, "decode_attention_backend", None) is None
    )
    if unset:
        # Before SGLang's DeepSeek-family rule would declare its GPU-kernel `dsa` backend.
        out["attention_backend"] = MX_DSA if is_dsa_checkpoint(server_args.model_path) else None
    # sgl_kernel's custom all-reduce is not there; NCCL serves tp > 1.
    out["disable_custom_all_reduce"] = True
    return {k: v for k, v in out.items() if v is not None}


class MxCudaPlatform(CudaDeviceMixin, SRTPlatform):
    """CUDA device ops from SGLang's own CUDA mixin; out-of-tree so its hooks are consulted."""

    _enum = PlatformEnum.OOT
    device_name = "cuda"
    device_type = "cuda"
    capabilities = PlatformCapabilities(
        supports_triton=True,
        graph_capture=True,
        piecewise_graph=False,  # its backend compiles through sgl_kernel-backed custom ops
        hicache_device_kernels=False,  # sgl_kernel's HiCache transfer kernels
        supports_pynccl=True,
    )

    def init_backend(self) -> None:
        logger.info("%s: custom ops on native torch, no sgl_kernel", ACTIVE_LINE)

    def apply_server_args_defaults(self, server_args) -> None:
        for name, value in server_args_defaults(server_args).items():
            setattr(server_args, name, value)

    def get_default_attention_backend(self) -> str:
        return MX_TRITON

    def get_compile_backend(self, mode: str | None = None) -> str:
        # Inductor would compile SGLang's torch.compile'd helpers (the MoE router) at the first
        # request, minutes of a short GPU lease, for a toy-sized gain.
        return "eager"

    def get_dispatch_key_name(self) -> str:
        # "cuda" would select forward_cuda methods, which call sgl_kernel.
        return "native"

    def get_graph_runner_cls(self) -> type:
        # An out-of-tree platform must name its runner (SGLang's in-tree fallback is refused);
        # SGLang's own decode CUDA-graph runner is the one we want.
        from sglang.srt.model_executor.runner.decode_cuda_graph_runner import (
            DecodeCudaGraphRunner,
        )

        return DecodeCudaGraphRunner

    def get_group_coordinator_device(self, local_rank: int) -> torch.device:
        return torch.device("cuda", local_rank)

    def get_quantization_config(self, quantization: str):
        from sglang_mx.quant import quantization_config_for

        return quantization_config_for(quantization)
