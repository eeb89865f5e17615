"""Host side of the Triton fused MXFP4 MoE: buffers and the launches. At decode on a GPU that is
three launches per MoE layer (alignment, gate_up + SwiGLU, down + top-k sum), four with W4A4
(the activation quantizer), no host sync."""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from sgl_kernel_rocm.arch import current_arch
from sgl_kernel_rocm.moe import _kernels
from sgl_kernel_rocm.moe.align import (
    TRITON_ALIGN_MAX_SLOTS,
    align_tokens,
    align_tokens_triton,
    worst_case_capacity,
)
from sgl_kernel_rocm.moe.config import (
    choose_path,
    choose_upcast,
    down_config,
    resolve_config,
    split_k_of,
    swap_ab_of,
    validate_config,
)
from sgl_kernel_rocm.moe.layout import MoEWeightLayout
from sgl_kernel_rocm.moe.weights import MoEWeights

_A_FMT = {torch.bfloat16: "bf16", torch.float16: "fp16"}
_TL_DTYPE = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


# Buffer allocator for kernel outputs; tests swap in one that fills them with poison.
_empty = torch.empty
# CPU runs size the alignment exactly (one host sync); tests turn this off to run the GPU's
# worst-case grid, whose surplus programs must exit without writing.
_EXACT_ALIGN_ON_CPU = True


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def fused_moe_triton(
    hidden_states: torch.Tensor,
    weights: MoEWeights,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    act_quant: str = "none",
    shared_output: torch.Tensor | None = None,
    path: str = "auto",
    config: dict | None = None,
    layout: MoEWeightLayout | None = None,
) -> torch.Tensor:
    """Inputs already validated by `fused_moe_mxfp4` (or `fused_moe_bf16` for unscaled bf16/fp16
    weights: the same kernels with W16). `layout` (prepared at load) allows the one-multiply
    upcast; without it the unpack path takes the full-scale-range variant."""
    from sgl_kernel_rocm._mx_triton import quantize_rows

    on_cpu = hidden_states.device.type == "cpu"
    if on_cpu and not _interpreting():
        raise RuntimeError(
            "backend='triton' on CPU tensors needs TRITON_INTERPRET=1 set before sgl_kernel_rocm "
            "is imported; use backend='torch' (or 'auto') for the CPU path"
        )
    num_tokens, hidden = hidden_states.shape
    num_experts, inter = weights.num_experts, weights.inter
    weights = weights.contiguous()
    w13, w2 = weights.w13, weights.w2
    # Unscaled weights: the bf16-weight baseline; the scale pointers are never read.
    w16 = not weights.is_mxfp4
    w13_scale = w13 if w16 else weights.w13_scale
    w2_scale = w2 if w16 else weights.w2_scale
    if w16:
        path, act_quant = "unpack", "none"
    top_k = topk_ids.shape[1]
    n_slots = num_tokens * top_k
    dtype = hidden_states.dtype
    arch = current_arch() if not on_cpu else "cpu"

    if path == "auto":
        path = choose_path(arch, dtype == torch.float32, act_quant=act_quant)
    if path == "dot_scaled" and act_quant == "none" and dtype not in _A_FMT:
        raise ValueError(f"path='dot_scaled' with W4A16 needs bf16/fp16 activations, got {dtype}")
    if config is None:
        config, _ = resolve_config(arch, num_tokens, num_experts, hidden, inter, act_quant)
    validate_config(config)
    # The down GEMM may carry its own tile (config "down"); BLOCK_M is shared (the alignment's).
    dconfig = down_config(config)
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    bn_d, bk_d = dconfig["BLOCK_N"], dconfig["BLOCK_K"]

    def launch_of(cfg: dict) -> dict:
        if _interpreting():
            return {}
        return {"num_warps": cfg.get("num_warps", 4), "num_stages": cfg.get("num_stages", 2)}

    a4 = act_quant == "mxfp4"
    dot_scaled = path == "dot_scaled"
    a_fmt = "e2m1" if a4 else _A_FMT.get(dtype, "bf16")
    # The interpreter's bf16 dot multiplies raw bits (triton #11584), so it gets fp32 operands.
    if _interpreting() or dtype == torch.float32:
        dot_dtype = tl.float32
    else:
        dot_dtype = _TL_DTYPE[dtype]

    manual_rne = _interpreting() and dtype == torch.bfloat16
    x = hidden_states.contiguous()
    # The word-wise upcast (unpack path): int32 loads need 4-byte aligned rows.
    words = (
        not dot_scaled
        and not w16
        and (
            layout.words
            if layout is not None
            else all(t.data_ptr() % 4 == 0 and t.shape[-1] % 4 == 0 for t in (w13, w2))
        )
    )
    full_range = layout is None or not layout.fast_scales
    # Split-K per GEMM (config data, `moe.config.split_k_of`): a third grid axis.
    sk_gate, sk_down = split_k_of(config)
    # Arrival counters, zeroed by the alignment launch: the down kernel's top-k sum, one per
    # (token, N tile of H); with a split gate_up, then one per (M block, N tile of INTER).
    n_tiles_h, n_tiles_i = triton.cdiv(hidden, bn_d), triton.cdiv(inter, bn)
    n_down_cnt = num_tokens * n_tiles_h
    n_gate_cnt = worst_case_capacity(n_slots, num_experts, bm) // bm * n_tiles_i
    counters = _empty((n_down_cnt + (n_gate_cnt if sk_gate > 1 else 0),), dtype=torch.int32,
                      device=x.device)  # fmt: skip
    if shared_output is not None and not shared_output.is_contiguous():
        shared_output = shared_output.contiguous()
    # The summed output. A token whose top-k ids are all -1 (EP-remote experts, pad rows) gets
    # no slot, so the down kernel never writes its row: it is zeros (+ the shared output).
    out = _empty((num_tokens, hidden), dtype=dtype, device=x.device)
    if n_slots <= TRITON_ALIGN_MAX_SLOTS and not (on_cpu and _EXACT_ALIGN_ON_CPU):
        # One launch, worst-case sized (no host sync); it also zeroes the counters and writes
        # the unrouted tokens' rows.
        align = align_tokens_triton(
            topk_ids, num_experts, bm, counters=counters, empty=_empty,
            unrouted_out=out, shared_output=shared_output,
        )  # fmt: skip
    else:
        align = align_tokens(topk_ids, num_experts, bm, exact=on_cpu and _EXACT_ALIGN_ON_CPU)
        counters.zero_()
        # Rows the down kernel sums are overwritten whole; the rest keep this.
        out.copy_(shared_output) if shared_output is not None else out.zero_()
    route_w = topk_weights.reshape(-1)
    if route_w.dtype != torch.float32 or not route_w.is_contiguous():
        route_w = route_w.to(torch.float32).contiguous()
    ids = topk_ids if topk_ids.is_contiguous() else topk_ids.contiguous()

    if a4:
        xq = _empty((num_tokens, hidden // 2), dtype=torch.uint8, device=x.device)
        xs = _empty((num_tokens, hidden // 32), dtype=torch.uint8, device=x.device)
        quantize_rows(x, out=(xq, xs))
    else:
        xq, xs = x, x  # unused placeholders, never read when A4 is False
    act = _empty((n_slots, inter), dtype=dtype, device=x.device)
    if a4:
        actq = _empty((n_slots, inter // 2), dtype=torch.uint8, device=x.device)
        acts = _empty((n_slots, inter // 32), dtype=torch.uint8, device=x.device)
    else:
        actq, acts = act, act

    # fp32 partials of the split gate_up tiles (gate then up columns per slot).
    gate_part = (
        _empty((sk_gate, n_slots, 2 * inter), dtype=torch.float32, device=x.device)
        if sk_gate > 1
        else act
    )
    down_cnt, gate_cnt = counters[:n_down_cnt], counters[n_down_cnt:]
    if sk_gate == 1:
        gate_cnt = counters  # never read

    # Constexprs both GEMMs share, then each GEMM's tile and launch options.
    common = dict(
        BLOCK_M=bm, A4=a4, DOT_SCALED=dot_scaled, A_FMT=a_fmt, DOT_DTYPE=dot_dtype,
        MANUAL_BF16_RNE=manual_rne, WORDS=words, FULL_SCALE_RANGE=full_range, W16=w16,
        UPCAST=choose_upcast(arch, config),
    )  # fmt: skip
    gate_tile = dict(BLOCK_N=bn, BLOCK_K=bk, SWAP_AB=swap_ab_of(config), **launch_of(config))
    down_tile = dict(BLOCK_N=bn_d, BLOCK_K=bk_d, SWAP_AB=swap_ab_of(dconfig),
                     **launch_of(dconfig))  # fmt: skip
    sizes = (n_slots, top_k, hidden, inter)
    _launch_gemm(
        _kernels.gate_up_swiglu_kernel[(align.num_blocks_bound, n_tiles_i, sk_gate)],
        (x, xq, xs),
        (w13, w13_scale),
        before=(act, actq, acts),
        after=(gate_part, gate_cnt),
        out_rows=(act, actq, acts),
        align=align,
        sizes=sizes,
        EVEN_K=hidden % bk == 0,
        SPLIT_K=sk_gate,
        **common,
        **gate_tile,
    )

    # Per-slot rows (masked slots are never written nor read) and the summed output; split
    # down partials are fp32 rows [split * n_slots + slot].
    if sk_down > 1:
        per_slot = _empty((sk_down * n_slots, hidden), dtype=torch.float32, device=x.device)
    else:
        per_slot = _empty((n_slots, hidden), dtype=dtype, device=x.device)
    shared = shared_output if shared_output is not None else out
    _launch_gemm(
        _kernels.down_kernel[(align.num_blocks_bound, n_tiles_h, sk_down)],
        (act, actq, acts),
        (w2, w2_scale),
        before=(route_w, per_slot),
        after=(out, shared, down_cnt, ids),
        out_rows=(per_slot, out, shared),
        align=align,
        sizes=sizes,
        EVEN_K=inter % bk_d == 0,
        FUSE_SUM=True,
        HAS_SHARED=shared_output is not None,
        K_PAD=triton.next_power_of_2(top_k),
        SPLIT_K=sk_down,
        **common,
        **down_tile,
    )
    return out


def _launch_gemm(kernel, a, w, *, before, after, out_rows, align, sizes, **constexprs) -> None:
    """Launch one of the two GEMMs (`kernel`, indexed by its grid) with the arguments in the order
    both kernels take them: the activation (bf16 rows, MXFP4 codes, scales) and weight (codes,
    scales) pointers, the kernel's own pointers `before` the alignment's and `after` them, the
    sizes (slots, top-k, hidden, inter), the activations' row strides, the weights' and their
    scales' expert and row strides, then the row strides of `out_rows`."""
    kernel(
        *a,
        *w,
        *before,
        align.sorted_ids,
        align.block_expert,
        align.num_padded,
        *after,
        *sizes,
        *(t.stride(0) for t in a),
        *(t.stride(dim) for t in w for dim in (0, 1)),
        *(t.stride(0) for t in out_rows),
        **constexprs,
    )
