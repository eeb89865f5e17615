"""Per layer kind of a GLM/DeepSeek-family model, which implementation serves it in this process:
the rows `sglang-mx info` prints under "layers". Each row is derived from the code that makes
the decision (MoE dispatch, the quantization config, the attention modules this build ships), so
the report follows the code rather than a copy of it."""

from __future__ import annotations

import importlib
import importlib.util

from sglang_mx.env import ENV

MLA_MODULE = "sglang_mx.attention.dsa.backend"
INDEXER_MODULE = "sglang_mx.attention.dsa.indexer"


def _module_summary(name: str) -> str | None:
    """First docstring line of one of our modules, or None when this build lacks it."""
    if importlib.util.find_spec(name) is None:
        return None
    module = importlib.import_module(name)
    return (module.__doc__ or name).strip().splitlines()[0].rstrip(".")


def _mlp_linears(cpu: bool) -> str:
    if ENV.disabled:
        return "SGLang's own linear methods (SGLANG_MX_DISABLE=1)"
    if cpu:
        return (
            "unquantized: SGLang's UnquantizedLinearMethod (torch matmul); MXFP4 (Quark): "
            "sglang_mx MxFp4LinearMethod (dequantized once at load, torch matmul; W4A4 rounds "
            "activations through MXFP4)"
        )
    return (
        "SGLang's own: QuarkW4A4MXFP4 for MXFP4 Quark linears (aiter GEMM), unquantized "
        "otherwise (sglang_mx takes only MoE layers on GPU nodes)"
    )


def _mla(cpu: bool) -> str:
    summary = None if ENV.disabled else _module_summary(MLA_MODULE)
    if summary:
        name = importlib.import_module(MLA_MODULE).BACKEND_NAME
        return f"sglang_mx `{name}` backend: {summary}"
    if cpu:
        return "none: SGLang 0.5.23 has only GPU MLA kernels (torch_native cannot do MLA)"
    return "SGLang's own MLA backends (--attention-backend dsa / triton / aiter ...)"


def _indexer(cpu: bool) -> str:
    summary = None if ENV.disabled else _module_summary(INDEXER_MODULE)
    if summary:
        return f"sglang_mx: {summary}"
    if cpu:
        return "none: SGLang 0.5.23's Indexer.forward_native raises"
    return "SGLang's GPU indexer (FP8 keys, Hadamard rotation)"


def layer_kinds(cpu: bool, moe_row: str, gqa_row: str) -> dict[str, str]:
    """`moe_row` and `gqa_row` come from the MoE dispatch and attention-backend reports."""
    linears = _mlp_linears(cpu)
    return {
        "routed experts (MoE)": moe_row,
        "shared experts": linears,
        "dense MLP": linears,
        "attention GQA": gqa_row,
        "attention MLA": _mla(cpu),
        "DSA indexer": _indexer(cpu),
    }
