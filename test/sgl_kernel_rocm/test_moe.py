"""Fused MXFP4 MoE: torch reference vs a per-token oracle, Triton kernels (interpreter) vs the
reference on both code paths, token alignment, input validation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from moe_support import assert_moe_close, poison_buffers
from sgl_kernel_rocm.moe import MoEWeights, fused_moe_mxfp4, prepare_reference_weights, triton_moe
from sgl_kernel_rocm.moe.align import align_tokens
from sgl_kernel_rocm.moe.routing import softmax_topk
from sgl_kernel_rocm.mx import dequantize_mxfp4, quantize_mxfp4


def _make_case(tokens, experts, hidden, inter, top_k, dtype, empty_experts=(), masked=0, seed=None):
    """Fresh random MoE inputs; `empty_experts` get no tokens, `masked` slots get id -1."""
    gen = torch.Generator().manual_seed(seed if seed is not None else int(torch.randint(2**31, ())))
    w13, s13 = quantize_mxfp4(torch.randn(experts, 2 * inter, hidden, generator=gen) * 0.1)
    w2, s2 = quantize_mxfp4(torch.randn(experts, hidden, inter, generator=gen) * 0.1)
    x = torch.randn(tokens, hidden, generator=gen).to(dtype)
    logits = torch.randn(tokens, experts, generator=gen)
    logits[:, list(empty_experts)] = float("-inf")
    tw, ti = softmax_topk(logits, top_k, renormalize=True)
    flat = ti.view(-1)
    flat[torch.randperm(flat.numel(), generator=gen)[:masked]] = -1
    return x, MoEWeights(w13, s13, w2, s2), tw, ti


def _oracle(x, w, tw, ti, act_quant):
    """Per-token, per-slot loop in fp64 over dequantized weights (SwiGLU output cast to the
    activation dtype, as the kernels store it)."""
    inter = w.w2.shape[2] * 2
    W13 = dequantize_mxfp4(w.w13, w.w13_scale, dtype=torch.float64)
    W2 = dequantize_mxfp4(w.w2, w.w2_scale, dtype=torch.float64)
    xq = x.float()
    if act_quant == "mxfp4":
        xq = dequantize_mxfp4(*quantize_mxfp4(xq), dtype=torch.float32)
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for k in range(ti.shape[1]):
            e = int(ti[t, k])
            if e < 0:
                continue
            gu = W13[e] @ xq[t].double()
            act = (F.silu(gu[:inter]) * gu[inter:]).to(x.dtype).float()
            if act_quant == "mxfp4":
                act = dequantize_mxfp4(*quantize_mxfp4(act), dtype=torch.float32)
            out[t] += float(tw[t, k]) * (W2[e] @ act.double())
    return out


@pytest.mark.parametrize("act_quant", ["none", "mxfp4"])
def test_reference_matches_per_token_oracle(act_quant):
    case = _make_case(13, 8, 64, 64, 3, torch.float32, empty_experts=(2, 5), masked=4)
    shared = torch.randn(13, 64)
    out = fused_moe_mxfp4(*case, act_quant=act_quant, backend="torch", shared_output=shared)
    ref = _oracle(*case, act_quant) + shared.double()
    # fp32 vs fp64 accumulation over <= 64-term dot products of O(1) values.
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def test_reference_prepared_weights_match():
    x, w, tw, ti = _make_case(6, 4, 64, 32, 2, torch.bfloat16)
    prepared = prepare_reference_weights(w)
    a = fused_moe_mxfp4(x, w, tw, ti, backend="torch")
    b = fused_moe_mxfp4(x, w, tw, ti, backend="torch", prepared=prepared)
    # Same arithmetic, weights dequantized earlier instead of per call.
    assert torch.equal(a, b)


def test_alignment_covers_every_slot_once():
    ti = torch.tensor([[0, 3], [3, -1], [3, 0], [1, 3], [-1, -1]], dtype=torch.int32)
    for exact in (True, False):
        al = align_tokens(ti, num_experts=5, block_m=4, exact=exact)
        n_slots = ti.numel()
        used = int(al.num_padded.item())
        assert used == 4 + 4 + 4  # experts 0, 1, 3 have 2, 1, 4 slots -> one block of 4 each
        ids = al.sorted_ids[:used].tolist()
        real = sorted(i for i in ids if i < n_slots)
        assert real == [i for i in range(n_slots) if ti.view(-1)[i] >= 0]
        for b in range(used // 4):
            e = int(al.block_expert[b])
            for i in ids[b * 4 : (b + 1) * 4]:
                assert i == n_slots or int(ti.view(-1)[i]) == e
        assert (al.block_expert[used // 4 :] == -1).all()


CASES = {
    # tokens, experts, hidden, inter, top_k, empty experts, masked slots
    "decode_1tok": (1, 4, 64, 64, 2, (), 0),
    "ragged_37tok": (37, 8, 128, 96, 3, (1, 6), 5),
}


@pytest.mark.parametrize("path", ["unpack", "dot_scaled"])
@pytest.mark.parametrize("act_quant", ["none", "mxfp4"])
@pytest.mark.parametrize("case", list(CASES))
def test_triton_matches_reference_bf16(monkeypatch, path, act_quant, case):
    poison_buffers(monkeypatch)
    t, e, h, i, k, empty, masked = CASES[case]
    args = _make_case(t, e, h, i, k, torch.bfloat16, empty, masked)
    shared = torch.randn(t, h).to(torch.bfloat16)
    out = fused_moe_mxfp4(
        *args, act_quant=act_quant, backend="triton", path=path, shared_output=shared
    )
    ref = fused_moe_mxfp4(*args, act_quant=act_quant, backend="torch", shared_output=shared)
    assert out.dtype == torch.bfloat16 and out.shape == (t, h)
    # moe_support.assert_moe_close: per-slot and output bf16 rounding, judged on the routed
    # part. W4A4 gets the same bound: its SwiGLU output is rounded to bf16 (RNE) before
    # quantizing on both sides, so an E2M1 code can only differ if fp32 summation-order noise
    # moves it across a bf16 rounding midpoint, which the bound would expose rather than hide.
    assert_moe_close(out, ref, shared, k, note=case)


def test_the_bf16_check_fails_on_planted_expert_errors(monkeypatch):
    """assert_moe_close judges the routed part: with an N(0, 1) shared output added, a uniform
    5% error in the experts and a row whose experts were never summed in (it keeps the
    pre-filled shared output) both fail it, while the kernel's own output passes."""
    poison_buffers(monkeypatch)
    monkeypatch.setattr(triton_moe, "_EXACT_ALIGN_ON_CPU", True)  # the path that pre-fills
    t, e, h, i, k, empty, masked = CASES["ragged_37tok"]
    args = _make_case(t, e, h, i, k, torch.bfloat16, empty, masked)
    shared = torch.randn(t, h).to(torch.bfloat16)
    out = fused_moe_mxfp4(*args, backend="triton", path="unpack", shared_output=shared)
    ref = fused_moe_mxfp4(*args, backend="torch", shared_output=shared)
    assert_moe_close(out, ref, shared, k)
    routed = out.float() - shared.float()
    scaled = (shared.float() + 1.05 * routed).to(torch.bfloat16)
    with pytest.raises(AssertionError, match="exceeds the bound"):
        assert_moe_close(scaled, ref, shared, k)
    live = int((args[3] >= 0).any(1).nonzero()[0])  # a token with a valid slot
    unwritten = out.clone()
    unwritten[live] = shared[live]
    with pytest.raises(AssertionError, match=f"worst \\[{live}, "):
        assert_moe_close(unwritten, ref, shared, k)


@pytest.mark.parametrize("act_quant", ["none", "mxfp4"])
def test_triton_matches_reference_fp32(monkeypatch, act_quant):
    poison_buffers(monkeypatch)
    t, e, h, i, k, empty, masked = CASES["ragged_37tok"]
    case = _make_case(t, e, h, i, k, torch.float32, empty, masked)
    out = fused_moe_mxfp4(*case, act_quant=act_quant, backend="triton", path="unpack")
    ref = fused_moe_mxfp4(*case, act_quant=act_quant, backend="torch")
    # fp32 everywhere: only summation order differs (a code flip in W4A4 would need a SwiGLU
    # output within ~1e-7 relative of an E2M1 midpoint).
    scale = ref.abs().max().item()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5 * scale)


def test_auto_backend_on_cpu_is_the_reference():
    case = _make_case(5, 4, 64, 32, 2, torch.bfloat16)
    assert torch.equal(fused_moe_mxfp4(*case), fused_moe_mxfp4(*case, backend="torch"))


def test_bad_inputs_raise_clear_errors():
    x, w, tw, ti = _make_case(3, 4, 64, 32, 2, torch.bfloat16)
    with pytest.raises(ValueError, match="act_quant"):
        fused_moe_mxfp4(x, w, tw, ti, act_quant="int4")
    bad_scale = MoEWeights(w.w13, w.w13_scale, w.w2, w.w2_scale[:, :, :0])
    with pytest.raises(ValueError, match="w2_scale"):
        fused_moe_mxfp4(x, bad_scale, tw, ti)
    with pytest.raises(ValueError, match="topk_ids"):
        fused_moe_mxfp4(x, w, tw, ti[:2])
    with pytest.raises(ValueError, match="hidden_states"):
        fused_moe_mxfp4(x[:, :32], w, tw, ti)
    with pytest.raises(ValueError, match="MXFP4"):
        fused_moe_mxfp4(x, MoEWeights.dense(w.w13, w.w2), tw, ti)
    with pytest.raises(ValueError, match="dot_scaled"):
        fused_moe_mxfp4(x.float(), w, tw, ti, backend="triton", path="dot_scaled")


def test_worst_case_grid_surplus_programs_write_nothing(monkeypatch):
    # The GPU path sizes the grid for the worst case without a host sync; run that grid here.
    poison_buffers(monkeypatch)
    monkeypatch.setattr(triton_moe, "_EXACT_ALIGN_ON_CPU", False)
    case = _make_case(9, 8, 64, 64, 2, torch.bfloat16, empty_experts=(0, 3), masked=3)
    out = fused_moe_mxfp4(*case, backend="triton", path="unpack")
    ref = fused_moe_mxfp4(*case, backend="torch")
    # Same bound as test_triton_matches_reference_bf16 (bf16 per-slot buffer, k = 2).
    scale = ref.float().abs().max().item()
    assert (out.float() - ref.float()).abs().max().item() <= 4 * 2.0**-8 * scale


# Which tokens get every top-k id set to -1: what SGLang's EP dispatch does to a token none of
# whose experts live on this rank (about a third of them at GLM-5.2's top-8 of 256 on EP8).
UNROUTED = {
    "one": lambda t: [t // 2],
    "all": lambda t: list(range(t)),
    "mix": lambda t: list(range(0, t, 3)),
}


@pytest.mark.parametrize("exact_align", [True, False], ids=["exact_grid", "worst_case_grid"])
@pytest.mark.parametrize("shared", [False, True], ids=["no_shared", "shared"])
@pytest.mark.parametrize("which", list(UNROUTED))
def test_fully_masked_tokens_get_zeros_or_shared(monkeypatch, exact_align, shared, which):
    poison_buffers(monkeypatch)
    monkeypatch.setattr(triton_moe, "_EXACT_ALIGN_ON_CPU", exact_align)
    t, h = 7, 64
    args = _make_case(t, 8, h, 64, 2, torch.bfloat16)
    rows = UNROUTED[which](t)
    args[-1][rows, :] = -1
    shared_out = torch.randn(t, h).to(torch.bfloat16) if shared else None
    out = fused_moe_mxfp4(*args, backend="triton", path="unpack", shared_output=shared_out)
    ref = fused_moe_mxfp4(*args, backend="torch", shared_output=shared_out)
    # A fully masked row is exactly zeros (+ the shared output): nothing is summed into it.
    expect = shared_out[rows] if shared else torch.zeros(len(rows), h, dtype=torch.bfloat16)
    assert torch.equal(out[rows], expect), f"unrouted rows {rows} not written"
    routed = [r for r in range(t) if r not in rows]
    if routed:
        # Same bound as test_triton_matches_reference_bf16 (bf16 per-slot buffer, k = 2).
        scale = ref[routed].float().abs().max().item()
        diff = (out[routed].float() - ref[routed].float()).abs().max().item()
        assert diff <= 4 * 2.0**-8 * scale
