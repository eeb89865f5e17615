"""The fused MXFP4 MoE case: random MXFP4 experts at a layer's shapes, made on the target device,
a few tokens routed over all of them, run as `MxFp4MoEMethod.apply` runs it (the requested
kernel backend, the load-time weight layout) against the torch reference."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sglang_mx.selfcheck.tolerance import ToleranceVerdict, moe_close

TOKENS = 4  # a decode batch: one launch of each GEMM, the decode tile


@dataclass(frozen=True)
class MoeShape:
    experts: int  # local experts of this rank
    hidden: int
    inter: int  # intermediate size per partition
    top_k: int
    act_quant: str  # "none" (W4A16) or "mxfp4" (W4A4)
    dtype: torch.dtype  # activations (the model dtype)

    def describe(self) -> str:
        a = "a4" if self.act_quant == "mxfp4" else "a16"
        dt = str(self.dtype).removeprefix("torch.")
        return f"E{self.experts} H{self.hidden} I{self.inter} top{self.top_k} {a} {dt}"


def check_moe(
    shape: MoeShape, device: torch.device | str, backend: str = "triton", tokens: int | None = None
) -> ToleranceVerdict:
    from sgl_kernel_rocm import moe as kernels
    from sgl_kernel_rocm.moe.reference import fused_moe_reference

    e, h, i = shape.experts, shape.hidden, shape.inter
    tokens = tokens or TOKENS
    g = torch.Generator(device=device).manual_seed(0)

    def codes(*dims: int, low: int = 0, high: int = 256) -> torch.Tensor:
        return torch.randint(low, high, dims, generator=g, device=device, dtype=torch.uint8)

    # Scales 2**-8..2**-5 keep E2M1 values at the size of trained expert weights (synthetic.py).
    weights = kernels.MoEWeights(
        codes(e, 2 * i, h // 2), codes(e, 2 * i, h // 32, low=119, high=123),
        codes(e, h, i // 2), codes(e, h, i // 32, low=119, high=123),
    )  # fmt: skip
    x = torch.randn(tokens, h, generator=g, device=device).to(shape.dtype)
    logits = torch.randn(tokens, e, generator=g, device=device)
    topk_weights, topk_ids = kernels.softmax_topk(logits, min(shape.top_k, e), renormalize=True)
    topk_ids = topk_ids.to(torch.int32)  # SGLang's TopK hands int32 ids
    out = kernels.fused_moe_mxfp4(
        x, weights, topk_weights.float(), topk_ids,
        act_quant=shape.act_quant, backend=backend, layout=kernels.prepare_weights(weights),
    )  # fmt: skip
    ref = fused_moe_reference(x, weights, topk_weights, topk_ids, act_quant=shape.act_quant)
    if out.shape != ref.shape:
        return ToleranceVerdict(
            False, float("nan"), 0.0, f"output {tuple(out.shape)} != {ref.shape}"
        )
    return moe_close(out, ref, shape.top_k)
