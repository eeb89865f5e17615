"""`sglang-mx quantize`: bf16 safetensors checkpoint -> MXFP4-experts checkpoint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "quantize",
        help="quantize a bf16 checkpoint to MXFP4 (our experts-only layout or AMD Quark's)",
        description="Write an MXFP4 copy of a Hugging Face safetensors checkpoint: quantized "
        "gate/up/down weights become packed E2M1 + E8M0 scales (blocks of 32 along the input "
        "dim). --format sglang_mx quantizes the routed experts only; --format quark writes AMD "
        "Quark's layout (quantization_config with exclude list; routed experts, shared experts "
        "and dense MLPs in MXFP4, or routed experts only with --quark-layout experts; attention, "
        "router and lm_head kept). The result loads in `sglang-mx serve --model-path DST`.",
    )
    p.add_argument("src", type=Path, help="bf16 checkpoint directory")
    p.add_argument("dst", type=Path, help="output directory")
    p.add_argument(
        "--format",
        choices=["sglang_mx", "quark"],
        default="sglang_mx",
        help="checkpoint layout: sglang_mx (default) or AMD Quark's",
    )
    p.add_argument(
        "--quark-layout",
        choices=["full", "experts"],
        default="full",
        help="with --format quark: full = experts, shared experts and dense MLPs in MXFP4 "
        "(default); experts = routed experts only",
    )
    p.add_argument(
        "--act-quant",
        choices=["none", "mxfp4"],
        default=None,
        help="activations at serve time: none = W4A16, mxfp4 = W4A4 (default: none for "
        "sglang_mx, mxfp4 for quark, as AMD ships it)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sglang_mx.quant.checkpoint import CheckpointError
    from sglang_mx.quant.convert import quantize_checkpoint

    try:
        act = args.act_quant or ("mxfp4" if args.format == "quark" else "none")
        r = quantize_checkpoint(
            args.src, args.dst, act_quant=act, fmt=args.format, layout=args.quark_layout
        )
    except (CheckpointError, ValueError) as e:
        print(f"sglang-mx quantize: error: {e}", file=sys.stderr)
        return 2
    print(
        f"quantized {r.quantized} tensors to MXFP4 ({args.format}), kept {r.kept}; "
        f"{r.bytes_in / 1e6:.1f} MB -> {r.bytes_out / 1e6:.1f} MB in {args.dst}"
    )
    return 0
