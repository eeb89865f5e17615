"""MXFP4 quantization methods for SGLang: checkpoints with quant_method "mxfp4" (ours) or AMD
Quark's MXFP4 (w4a4 / w4a16; routed experts, shared experts, dense MLPs). MoE experts run
through `sgl_kernel_rocm.moe`, MXFP4 MLP linears through `linear_method`."""

from __future__ import annotations

SUPPORTED = ("mxfp4", "quark")


def quantization_config_for(name: str):
    """The config class the sglang_mx platform returns for SGLang's quantization `name`."""
    if name not in SUPPORTED:
        return None
    from sglang_mx.quant.config import MxFp4ExpertsConfig

    return MxFp4ExpertsConfig
