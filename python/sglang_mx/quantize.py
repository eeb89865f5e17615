"""bf16 safetensors checkpoint -> MXFP4-experts checkpoint (the production recipe: MoE experts
only; attention, router, shared expert, dense MLPs, embeddings and lm_head keep their dtype).

Expert projections `...mlp.experts.{e}.{gate,up,down}_proj.weight` [out, in] become a uint8
`weight` [out, in/2] (two E2M1 codes per byte, even element in the low nibble) and a uint8 E8M0
`weight_scale` [out, in/32], quantized along the input dim. The config gains
{"quant_method": "mxfp4", "format": "sglang_mx", "act_quant": ...}.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from sglang_mx.checkpoint import CheckpointError, load_config, open_shards

EXPERT_WEIGHT = re.compile(r".*\.mlp\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight$")
COPY_SUFFIXES = (".json", ".jinja", ".txt", ".model", ".tiktoken", ".py", ".md")


@dataclass
class QuantizeReport:
    quantized: int
    kept: int
    bytes_in: int
    bytes_out: int


def quantize_checkpoint(src: Path, dst: Path, act_quant: str = "none") -> QuantizeReport:
    from safetensors.torch import save_file
    from sgl_kernel_rocm.mx import quantize_mxfp4

    src, dst = Path(src), Path(dst)
    if act_quant not in ("none", "mxfp4"):
        raise ValueError(f"act_quant must be 'none' (W4A16) or 'mxfp4' (W4A4), got {act_quant!r}")
    config = load_config(src)
    if config.get("quantization_config"):
        raise CheckpointError(
            src / "config.json", "is already quantized; quantize a bf16 checkpoint"
        )
    if src.resolve() == dst.resolve():
        raise ValueError("destination must differ from the source checkpoint")
    dst.mkdir(parents=True, exist_ok=True)

    tensors: dict[str, torch.Tensor] = {}
    report = QuantizeReport(0, 0, 0, 0)
    for name, tensor in open_shards(src):
        report.bytes_in += tensor.numel() * tensor.element_size()
        if EXPERT_WEIGHT.match(name):
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
    if report.quantized == 0:
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
    config["quantization_config"] = {
        "quant_method": "mxfp4",
        "format": "sglang_mx",
        "block_size": 32,
        "act_quant": act_quant,
        "modules": "experts",
    }
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return report
