"""bf16 safetensors checkpoint -> MXFP4 checkpoint, in one of two layouts:

- "sglang_mx" (default): MoE experts only; attention, router, shared expert, dense MLPs,
  embeddings and lm_head keep their dtype. The config gains
  {"quant_method": "mxfp4", "format": "sglang_mx", "act_quant": ...}.
- "quark": what AMD Quark's MXFP4 exports of DeepSeek-family models hold
  (`sglang_mx.quant.quark_layout`): its `quantization_config` with exclude list, and MXFP4
  routed experts, shared experts and dense MLPs ("full") or routed experts only ("experts").

Either way a quantized projection `X.weight` [out, in] becomes a uint8 `X.weight` [out, in/2]
(two E2M1 codes per byte, even element in the low nibble) and a uint8 E8M0 `X.weight_scale`
[out, in/32], quantized along the input dim.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from sglang_mx.quant import quark_layout
from sglang_mx.quant.checkpoint import CheckpointError, load_config, open_shards
from sglang_mx.quant.scheme import parse_scheme

COPY_SUFFIXES = (".json", ".jinja", ".txt", ".model", ".tiktoken", ".py", ".md")


@dataclass
class QuantizeReport:
    quantized: int
    kept: int
    bytes_in: int
    bytes_out: int


FORMATS = ("sglang_mx", "quark")


def _quantization_config(config: dict, fmt: str, act_quant: str, layout: str) -> dict:
    if fmt == "quark":
        return quark_layout.quantization_config(config, act_quant, layout)
    if fmt != "sglang_mx":
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if act_quant not in ("none", "mxfp4"):
        raise ValueError(f"act_quant must be 'none' (W4A16) or 'mxfp4' (W4A4), got {act_quant!r}")
    return {
        "quant_method": "mxfp4",
        "format": "sglang_mx",
        "block_size": 32,
        "act_quant": act_quant,
        "modules": "experts",
    }


def quantize_checkpoint(
    src: Path,
    dst: Path,
    act_quant: str = "none",
    fmt: str = "sglang_mx",
    layout: str = "full",
) -> QuantizeReport:
    """Write the MXFP4 copy of `src` to `dst`; `layout` ("full"/"experts") applies to Quark."""
    from safetensors.torch import save_file
    from sgl_kernel_rocm.mx import quantize_mxfp4

    src, dst = Path(src), Path(dst)
    config = load_config(src)
    if config.get("quantization_config"):
        raise CheckpointError(
            src / "config.json", "is already quantized; quantize a bf16 checkpoint"
        )
    quant_config = _quantization_config(config, fmt, act_quant, layout)
    scheme = parse_scheme(quant_config)
    if src.resolve() == dst.resolve():
        raise ValueError("destination must differ from the source checkpoint")
    dst.mkdir(parents=True, exist_ok=True)

    tensors: dict[str, torch.Tensor] = {}
    report = QuantizeReport(0, 0, 0, 0)
    for name, tensor in open_shards(src):
        report.bytes_in += tensor.numel() * tensor.element_size()
        if quark_layout.quantized_module(name, scheme):
            if tensor.shape[-1] % 32:
                raise CheckpointError(
                    src, f"tensor {name} has input dim {tensor.shape[-1]}, not a multiple of 32"
                )
            packed, scales = quantize_mxfp4(tensor.float(), axis=-1)
            tensors[name] = packed.contiguous()
            tensors[name + "_scale"] = scales.contiguous()
            report.quantized += 1
        else:
            tensors[name] = tensor.contiguous()
            report.kept += 1
    if not any(".mlp.experts." in n for n in tensors if n.endswith("_scale")):
        raise CheckpointError(src, "has no MoE expert weights (...mlp.experts.N.*_proj.weight)")
    for t in tensors.values():
        report.bytes_out += t.numel() * t.element_size()
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})

    for f in src.iterdir():
        if (
            f.is_file()
            and f.suffix in COPY_SUFFIXES
            and f.name not in ("config.json", "model.safetensors.index.json")
        ):
            shutil.copy2(f, dst / f.name)
    config["quantization_config"] = quant_config
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return report
