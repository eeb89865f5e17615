"""Compiled Triton kernels on a real GPU vs their torch references (MXFP4, fused MoE, decode).

Every test is marked `gpu`; test/conftest.py skips them unless SGLANG_MX_TEST_GPU=1 and CUDA is
available. On a GPU node (scripts/gpu_check.sh runs exactly this):

    SGLANG_MX_TEST_GPU=1 python -m pytest -m gpu test/sgl_kernel_rocm -q

Shapes are GLM-5.2-like, scaled down (MoE H 1024/2048, I 256/512, E 32/64, top-8, 1-300 tokens;
decode contexts up to 4k), and the cases share few constexpr combinations, so the file costs
about 2 min of Triton compiles plus 1 min of running on an H200.

CPU smoke mode, the default (part of `make test`): without SGLANG_MX_TEST_GPU the module drops
the gpu marker and runs the same bodies on CPU tensors through the Triton interpreter (conftest
sets TRITON_INTERPRET=1) at tiny shapes (32 s of CPU on the 2-core box, 2026-12-01), so a wrong
API call or a broken test body shows up between GPU runs. SGLANG_MX_GPU_TESTS_ON_CPU=1 forces it
even then.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
import torch
from attention_support import assert_bf16_close, assert_topk_selection, scattered_pages
from moe_support import poison_buffers
from sgl_kernel_rocm import attention
from sgl_kernel_rocm.arch import current_arch, has_native_dot_scaled
from sgl_kernel_rocm.moe import fused_moe_mxfp4, softmax_topk, triton_moe
from sgl_kernel_rocm.moe.synthetic import random_moe_inputs
from sgl_kernel_rocm.mx import quantize_mxfp4, quantize_mxfp4_triton

CPU_SMOKE = (os.environ.get("SGLANG_MX_GPU_TESTS_ON_CPU") == "1"
             or not os.environ.get("SGLANG_MX_TEST_GPU"))  # fmt: skip
DEVICE = "cpu" if CPU_SMOKE else "cuda"
pytestmark = [] if CPU_SMOKE else [pytest.mark.gpu]
if CPU_SMOKE and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("CPU smoke mode needs TRITON_INTERPRET=1", allow_module_level=True)

FP8 = torch.float8_e4m3fn
KV_IDS = {torch.bfloat16: "bf16", FP8: "fp8"}


def _fresh_seed() -> int:
    """A new seed per case (fresh inputs each run), reported in failure messages."""
    return int(torch.randint(2**31, ()))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _arch() -> str:
    return "cpu" if CPU_SMOKE else current_arch()


@contextlib.contextmanager
def _exact_fp32() -> Iterator[None]:
    """fp32 references must not run their matmuls in TF32 (~1e-3 relative) on the GPU."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


# ----------------------------------------------------------------------------- MXFP4 quantizer

QUANT_SHAPES = [(1, 32), (5, 96), (33, 288)] if CPU_SMOKE else [(1, 32), (300, 6144), (2049, 2080)]


@pytest.mark.parametrize("shape", QUANT_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_quantize_mxfp4_triton_bit_exact(shape, dtype):
    seed = _fresh_seed()
    rows, cols = shape
    x = torch.randn(shape, generator=_gen(seed)) * torch.logspace(-3, 3, cols)
    x[0, 3] = float("nan")
    if rows > 2:
        x[1, :32] = 0.0  # all-zero block: smallest scale
        x[2, 32:64] = 2.0**-130  # fp32/bf16 subnormals: exponent clamps at -127
        x[rows - 1, cols - 1] = float("-inf")
        x[rows // 2, 0] = float("inf")
    x = x.to(dtype)
    # Poisoned outputs: any byte the kernel fails to write shows up as a mismatch.
    q = torch.full((rows, cols // 2), 0xAB, dtype=torch.uint8, device=DEVICE)
    s = torch.full((rows, cols // 32), 0xAB, dtype=torch.uint8, device=DEVICE)
    quantize_mxfp4_triton(x.to(DEVICE), out=(q, s))
    ref_q, ref_s = quantize_mxfp4(x)  # the torch reference on the CPU is the ground truth
    assert torch.equal(s.cpu(), ref_s), f"E8M0 scales differ (seed {seed})"
    assert torch.equal(q.cpu(), ref_q), f"E2M1 codes differ (seed {seed})"


# ----------------------------------------------------------------------------- fused MoE

if CPU_SMOKE:
    # name: tokens, experts, hidden, inter, top_k, empty experts, masked slots, shared expert
    MOE_CASES = {
        "decode_1tok": (1, 4, 64, 64, 2, (), 0, False),
        "ragged_6tok": (6, 8, 64, 64, 3, (1, 6), 3, True),
    }
else:
    MOE_CASES = {
        "decode_1tok_E32_H1024_I256": (1, 32, 1024, 256, 8, (), 0, False),
        "decode_7tok_E64_H2048_I512": (7, 64, 2048, 512, 8, (3, 40), 5, True),
        "ragged_64tok_E32_H1024_I256": (64, 32, 1024, 256, 8, (0, 7, 31), 17, False),
        "prefill_300tok_E64_H2048_I512": (300, 64, 2048, 512, 8, (5, 6, 63), 41, True),
    }


def _moe_case(tokens, experts, hidden, inter, top_k, empty, masked, seed):
    """Synthetic MXFP4 weights on the device plus ragged routing: two hot experts draw most
    slots, `empty` experts get none, `masked` slots are -1 (dropped)."""
    x, weights, _, _ = random_moe_inputs(
        tokens, experts, hidden, inter, top_k, device=DEVICE, seed=seed
    )
    g = _gen(seed + 1)
    logits = torch.randn(tokens, experts, generator=g)
    logits[:, torch.randperm(experts, generator=g)[:2]] += 2.5
    logits[:, list(empty)] = float("-inf")
    tw, ti = softmax_topk(logits, top_k, renormalize=True)
    flat = ti.view(-1)
    flat[torch.randperm(flat.numel(), generator=g)[:masked]] = -1
    return x, weights, tw.to(DEVICE), ti.to(DEVICE)


def _poison_moe_buffers(monkeypatch) -> None:
    """Kernel intermediates start as NaN / 0xFF so anything read but never written shows."""
    poison_buffers(monkeypatch)
    # The GPU path sizes the grid for the worst case without a host sync; the smoke run too.
    monkeypatch.setattr(triton_moe, "_EXACT_ALIGN_ON_CPU", False)


@pytest.mark.parametrize("act_quant", ["none", "mxfp4"])
@pytest.mark.parametrize("path", ["unpack", "dot_scaled"])
@pytest.mark.parametrize("case", list(MOE_CASES))
def test_fused_moe_triton_matches_reference(monkeypatch, case, path, act_quant):
    arch = _arch()
    if DEVICE == "cuda" and path == "dot_scaled" and not has_native_dot_scaled(arch):
        # Stated by arch, never by exception text: a compile error of our code fails the test.
        pytest.skip(f"{arch} has no native block-scaled MMA; choose_path() runs unpack there")
    _poison_moe_buffers(monkeypatch)
    seed = _fresh_seed()
    t, e, h, i, k, empty, masked, with_shared = MOE_CASES[case]
    args = _moe_case(t, e, h, i, k, empty, masked, seed)
    shared = torch.randn(t, h, generator=_gen(seed + 2)).to(torch.bfloat16).to(DEVICE)
    shared = shared if with_shared else None
    out = fused_moe_mxfp4(
        *args, act_quant=act_quant, backend="triton", path=path, shared_output=shared
    )
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    with _exact_fp32():
        ref = fused_moe_mxfp4(*args, act_quant=act_quant, backend="torch", shared_output=shared)
    assert out.dtype == torch.bfloat16 and out.shape == (t, h)
    assert torch.isfinite(out).all(), f"non-finite output (poisoned buffer read?), seed {seed}"
    diff = out.float() - ref.float()
    scale = ref.float().abs().max().item()
    # Bound of test_moe.py: the k weighted expert outputs are each rounded to bf16 in the
    # per-slot buffer (2**-9 relative, round-to-nearest-even on the GPU as in the reference),
    # plus the output rounding on both sides. Products are exact on both sides (E2M1 x 2**e is
    # exact in bf16) and both accumulate in fp32, so only summation order differs; W4A4 can
    # flip an E2M1 code when that noise crosses a bf16 midpoint of the SwiGLU output, which
    # moves one term of a 256-512 term sum: inside the bound, and rare.
    bound = (k + 2) * 2.0**-8 * scale
    assert diff.abs().max().item() <= bound, (
        f"max |out - ref| {diff.abs().max().item():.3e} > {bound:.3e} (seed {seed})"
    )
    # Systematic error the max bound is too loose to see: bf16 operands land between 1e-3 and
    # 1e-2 in ||out - ref|| / ||ref||.
    rel = (diff.norm() / ref.float().norm()).item()
    assert rel <= 1e-2, f"relative L2 error {rel:.3e} > 1e-2 (seed {seed})"


# ----------------------------------------------------------------------------- decode attention


def _check_attn(out: torch.Tensor, ref: torch.Tensor, seed: int) -> None:
    # The CPU tests' tolerance (bf16/fp8 operands are exact in the bf16 dots; the bf16 rounding
    # of the probabilities before the P.V dot is 2**-9 relative and averages out), plus a
    # relative L2 bound.
    assert_bf16_close(out, ref, f"seed {seed}")
    ref = ref.to(out.device)
    norm = ref.norm().item()
    if norm > 0:
        rel = (out.double() - ref).norm().item() / norm
        assert rel <= 1e-2, f"relative L2 error {rel:.3e} > 1e-2 (seed {seed})"


def _paged(seed: int, page: int, lens: list[int], entry: tuple[int, ...], kv_dtype: torch.dtype):
    """Fresh random paged cache, pages scattered over a larger pool; fp8 values use the e4m3
    range (x4) and are scaled back by the dequant scales the tests pass."""
    g = _gen(seed)
    max_pages = -(-max(lens) // page)
    pool = len(lens) * max_pages + 3
    cache, bt = scattered_pages(g, pool, page, entry, kv_dtype, len(lens), max_pages)
    seq = torch.tensor(lens, dtype=torch.int32)
    return g, cache.to(DEVICE), bt.to(DEVICE), seq.to(DEVICE)


# GQA: GLM-4.5-style head_dim 128 on the GPU. The 8 rows are a 2**(4-1) design: every pair of
# (page, group, kv dtype, splits) values occurs, with 8 kernel variants instead of 16.
GQA_D, GQA_HKV = (64, 2) if CPU_SMOKE else (128, 4)
GQA_LENS = [1, 37, 70] if CPU_SMOKE else [1, 17, 300, 1000, 2047, 3001, 4096]
SPLITS = 3 if CPU_SMOKE else 4
GQA_CASES = [
    (1, 1, torch.bfloat16, 1),
    (1, 8, torch.bfloat16, SPLITS),
    (1, 1, FP8, SPLITS),
    (1, 8, FP8, 1),
    (16, 1, torch.bfloat16, SPLITS),
    (16, 8, torch.bfloat16, 1),
    (16, 1, FP8, 1),
    (16, 8, FP8, SPLITS),
]


def _gqa_inputs(seed, page, group, kv_dtype, lens):
    g, k, bt, seq = _paged(seed, page, lens, (GQA_HKV, GQA_D), kv_dtype)
    v = torch.randn(k.shape, generator=g)
    v = (v * 4).to(kv_dtype) if kv_dtype == FP8 else v.to(kv_dtype)
    q = torch.randn(len(lens), GQA_HKV * group, GQA_D, generator=g).to(torch.bfloat16)
    fp8 = kv_dtype == FP8
    k_scale = torch.tensor([0.25, 0.125] * (GQA_HKV // 2)) if fp8 else None  # per KV head
    v_scale = 0.25 if fp8 else None
    return q.to(DEVICE), k, v.to(DEVICE), bt, seq, k_scale, v_scale


@pytest.mark.parametrize(
    "page,group,kv_dtype,splits",
    GQA_CASES,
    ids=[f"page{p}-group{g}-{KV_IDS[d]}-splits{s}" for p, g, d, s in GQA_CASES],
)
def test_gqa_decode_matches_reference(page, group, kv_dtype, splits):
    seed = _fresh_seed()
    q, k, v, bt, seq, ks, vs = _gqa_inputs(seed, page, group, kv_dtype, GQA_LENS)
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16, device=DEVICE)
    attention.gqa_decode(q, k, v, bt, seq, k_scale=ks, v_scale=vs, num_splits=splits, out=out)
    _check_attn(out, attention.gqa_decode_ref(q, k, v, bt, seq, k_scale=ks, v_scale=vs), seed)


def test_gqa_decode_planned_splits_and_lse():
    """num_splits from the arch's config (what serving uses), plus the returned log-sum-exp."""
    seed = _fresh_seed()
    page, group = 16, 8
    q, k, v, bt, seq, _, _ = _gqa_inputs(seed, page, group, torch.bfloat16, GQA_LENS)
    out, lse = attention.gqa_decode(q, k, v, bt, seq, return_lse=True)
    _check_attn(out, attention.gqa_decode_ref(q, k, v, bt, seq), seed)
    for b, n in enumerate(GQA_LENS):
        pos = torch.arange(n, device=DEVICE)
        keys = k[bt[b, pos // page].long(), pos % page].double()  # [n, Hkv, D]
        keys = keys.repeat_interleave(group, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].double(), keys) * GQA_D**-0.5
        # fp32 running max/sum in log2 units: ~1e-6 relative of |lse| (a few units).
        torch.testing.assert_close(lse[b].double(), torch.logsumexp(s, -1), atol=1e-4, rtol=0)


# MLA / DSA: GLM-5 latent 512 + rope 64, 64 heads on the GPU (16 in the smoke run).
MLA_HEADS = 16 if CPU_SMOKE else 64
D_QK = 576
MLA_LENS = [1, 45, 190] if CPU_SMOKE else [1, 45, 700, 2048, 3333]
# Every pair of (page, kv dtype, splits) values, 4 kernel variants.
MLA_CASES = [
    (1, torch.bfloat16, 1),
    (1, FP8, SPLITS),
    (64, torch.bfloat16, SPLITS),
    (64, FP8, 1),
]


def _latent_ids(cases) -> list[str]:
    """Test ids of (page, kv dtype, splits) cases; splits None: the arch's planned count."""
    return [f"page{p}-{KV_IDS[d]}-splits{s or 'planned'}" for p, d, s in cases]


def _latent_out(batch: int) -> torch.Tensor:
    """A NaN-poisoned bf16 output for `batch` requests of the latent (512) value width."""
    return torch.full((batch, MLA_HEADS, 512), float("nan"), dtype=torch.bfloat16).to(DEVICE)


def _mla_inputs(seed, page, kv_dtype, lens):
    g, kv, bt, seq = _paged(seed, page, lens, (D_QK,), kv_dtype)
    q = torch.randn(len(lens), MLA_HEADS, D_QK, generator=g).to(torch.bfloat16).to(DEVICE)
    scale = 0.25 if kv_dtype == FP8 else None  # per-tensor FP8 dequant
    return g, q, kv, bt, seq, scale


@pytest.mark.parametrize("page,kv_dtype,splits", MLA_CASES, ids=_latent_ids(MLA_CASES))
def test_mla_decode_matches_reference(page, kv_dtype, splits):
    seed = _fresh_seed()
    _, q, kv, bt, seq, scale = _mla_inputs(seed, page, kv_dtype, MLA_LENS)
    out = _latent_out(len(MLA_LENS))
    attention.mla_decode(q, kv, bt, seq, kv_scale=scale, num_splits=splits, out=out)
    _check_attn(out, attention.mla_decode_ref(q, kv, bt, seq, kv_scale=scale), seed)


def test_mla_decode_planned_splits_fp8():
    seed = _fresh_seed()
    _, q, kv, bt, seq, scale = _mla_inputs(seed, 64, FP8, MLA_LENS)
    out = attention.mla_decode(q, kv, bt, seq, kv_scale=scale)
    _check_attn(out, attention.mla_decode_ref(q, kv, bt, seq, kv_scale=scale), seed)


DSA_TOPK = 96 if CPU_SMOKE else 2048  # GLM-5 index_topk


def _dsa_indices(g: torch.Generator, lens: list[int]) -> torch.Tensor:
    """Per-request lists: one token listed thrice, duplicates and out-of-range entries, full
    lists, an empty list, and for long requests a random subset."""
    idx = torch.full((len(lens), DSA_TOPK), -1, dtype=torch.int32)
    idx[0, :3] = 0
    n1 = lens[1]
    idx[1, :40] = torch.randint(0, n1, (40,), generator=g, dtype=torch.int32)
    idx[1, 40:45] = n1 + 20  # beyond seq_len: skipped
    for b in range(2, len(lens) - 1):
        take = min(DSA_TOPK, lens[b])
        idx[b, :take] = torch.randperm(lens[b], generator=g)[:take].to(torch.int32)
        idx[b, 10:20] = idx[b, 0]  # ten duplicates of one position
    # Last request: nothing valid -> zeros.
    return idx


DSA_LENS = [1, 50, 220, 300] if CPU_SMOKE else [1, 50, 1500, 2048, 3333, 4000, 600]
DSA_CASES = [(1, torch.bfloat16, 1), (64, FP8, SPLITS), (64, torch.bfloat16, None)]


@pytest.mark.parametrize("page,kv_dtype,splits", DSA_CASES, ids=_latent_ids(DSA_CASES))
def test_dsa_sparse_decode_matches_reference(page, kv_dtype, splits):
    seed = _fresh_seed()
    g, q, kv, bt, seq, scale = _mla_inputs(seed, page, kv_dtype, DSA_LENS)
    idx = _dsa_indices(g, DSA_LENS).to(DEVICE)
    out = _latent_out(len(DSA_LENS))
    attention.dsa_sparse_decode(q, kv, bt, seq, idx, kv_scale=scale, num_splits=splits, out=out)
    _check_attn(out, attention.dsa_sparse_decode_ref(q, kv, bt, seq, idx, kv_scale=scale), seed)
    assert torch.equal(out[-1], torch.zeros_like(out[-1])), "an empty index list must give zeros"


IDX_LENS = [1, 40, 257] if CPU_SMOKE else [1, 40, 257, 2048, 4000]
IDX_TOPK = 64 if CPU_SMOKE else 2048


@pytest.mark.parametrize("page", [1, 64] if not CPU_SMOKE else [1, 16])
def test_dsa_indexer_scores_and_topk(page):
    seed = _fresh_seed()
    g, k, bt, seq = _paged(seed, page, IDX_LENS, (128,), FP8)
    k_scale = (torch.rand(k.shape[:2], generator=g) + 0.05).to(DEVICE)  # per-token FP8 scale
    q = torch.randn(len(IDX_LENS), 32, 128, generator=g).to(torch.bfloat16).to(DEVICE)
    w = (torch.randn(len(IDX_LENS), 32, generator=g) * 128**-0.5).to(DEVICE)
    scores = attention.dsa_indexer_scores(q, w, k, k_scale, bt, seq, max(IDX_LENS)).cpu()
    # The reference builds its output on the CPU: give it CPU inputs.
    ref = attention.dsa_indexer_scores_ref(
        q.cpu(), w.cpu(), k.cpu(), k_scale.cpu(), bt.cpu(), seq.cpu()
    )
    assert torch.equal(torch.isinf(scores), torch.isinf(ref)), "padding must be -inf"
    fin = torch.isfinite(ref)
    # fp32 dot over 128 dims of exact bf16 x fp8 products, then a 32-head weighted sum: ~1e-6
    # relative of the largest score (CPU tests: 1e-4 absolute at O(10) scores).
    atol = max(1e-4, 1e-5 * ref[fin].abs().max().item())
    torch.testing.assert_close(scores[fin].double(), ref[fin], atol=atol, rtol=1e-5)

    idx = attention.dsa_indexer(q, w, k, k_scale, bt, seq, top_k=IDX_TOPK).cpu()
    assert_topk_selection(idx, ref, IDX_LENS, IDX_TOPK, slack=2 * atol, note=f"seed {seed}")
