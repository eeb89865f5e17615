"""`sglang-mx quantize`: bf16 safetensors checkpoint -> MXFP4-experts checkpoint."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "quantize",
        help="quantize a bf16 checkpoint's MoE experts to MXFP4 (everything else kept)",
        description="Write an MXFP4-experts copy of a Hugging Face safetensors checkpoint: expert "
        "gate/up/down weights become packed E2M1 + E8M0 scales (blocks of 32 along the input "
        "dim); attention, router, shared expert, dense MLPs, embeddings and lm_head are kept. "
        "The result loads in `sglang-mx serve --model-path DST`.",
    )
    p.add_argument("src", type=Path, help="bf16 checkpoint directory")
    p.add_argument("dst", type=Path, help="output directory")
    p.add_argument(
        "--act-quant",
        choices=["none", "mxfp4"],
        default="none",
        help="activations at serve time: none = W4A16 (default), mxfp4 = W4A4",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sglang_mx.checkpoint import CheckpointError
    from sglang_mx.quantize import quantize_checkpoint

    try:
        r = quantize_checkpoint(args.src, args.dst, act_quant=args.act_quant)
    except (CheckpointError, ValueError) as e:
        print(f"sglang-mx quantize: error: {e}")
        return 2
    print(
        f"quantized {r.quantized} expert tensors, kept {r.kept}; "
        f"{r.bytes_in / 1e6:.1f} MB -> {r.bytes_out / 1e6:.1f} MB in {args.dst}"
    )
    return 0
