"""`--kv-cache-dtype fp8_e4m3` through mx_dsa on SGLang's real DSATokenToKVPool (page 64), no
server: the layouts SGLang picks, its own writes of them, and both of our read paths.

SGLang 0.5.23 writes an FP8 DSA latent through `set_mla_kv_buffer` (attention/dsa/latent_cache.py):
- packed rows (a pool with `override_kv_cache_dim`, 656 bytes: what a CPU box gets, where the
  DSA backends resolve to flashmla_kv; Hopper the same);
- plain FP8 rows on HIP (`set_mla_kv_buffer_triton_fp8_quant`, reached here by setting the
  pool module's `_is_hip` after the pool is built: its constructor's HIP branch wants page 1);
- plain FP8 rows by a cast elsewhere (raw-layout backends: trtllm, tilelang).

SGLang's FP8 writers are Triton kernels, run here by the interpreter. Its fp32 -> e4m3 cast
(Triton 3.8) rounds without carrying into the exponent (124.3 -> 64), so these tests give the
interpreter torch's cast (`exact_fp8_casts`) to compare bytes; the CPU server uses a torch twin
of the packed quantizer instead (latent_cache.cpu_quantize_k_cache, tested below).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from dsa_pool_support import PAGE, decode_batch, mx_dsa_backend, scattered_requests

LAYERS = 1
TOPK = 128
FP8 = torch.float8_e4m3fn


@pytest.fixture
def exact_fp8_casts(monkeypatch):
    """The Triton interpreter's float -> e4m3 casts done by torch (round to nearest even, the
    GPU's cvt), and its bf16 -> fp32 widening too: the interpreter (Triton 3.8) normalizes a
    subnormal bf16 and then clamps the exponent at the fp32 floor, so 0x0010 (1.5e-39) reads 0
    and 0x0070 reads 8.8e-39 for 1.03e-38. A GPU widens bf16 by a 16-bit shift, exactly. The
    plain FP8 kernel path moves e4m3 codes into bf16 worth value * 2^-120 (fp8_bits.py), so every
    e4m3 subnormal (|x| < 2^-6, ~1.3% of a unit Gaussian) is a bf16 subnormal there: that was the
    1e-3 error this path showed in the interpreter. Every other conversion as the interpreter
    does it."""
    import triton.language as tl
    from triton.runtime import interpreter

    real = interpreter._convert_float
    targets = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e4b8: torch.float8_e4m3fnuz}
    sources = {tl.float32: (np.int32, torch.float32), tl.bfloat16: (np.int16, torch.bfloat16),
               tl.float16: (np.int16, torch.float16)}  # fmt: skip

    def convert(data, src, dst, rounding_mode):
        widen = src == tl.bfloat16 and dst == tl.float32
        if not widen and (dst not in targets or src not in sources):
            return real(data, src, dst, rounding_mode)
        ints, dtype = sources[src]
        t = torch.from_numpy(np.frombuffer(data.tobytes(), dtype=ints).copy()).view(dtype)
        if widen:
            return t.float().view(torch.int32).numpy().view(np.uint32).reshape(data.shape)
        return t.to(targets[dst]).view(torch.uint8).numpy().reshape(data.shape)

    monkeypatch.setattr(interpreter, "_convert_float", convert)


def fp8_pool(size: int, kv_cache_dim: int):
    """A DSATokenToKVPool with an FP8 latent as SGLang builds it for --kv-cache-dtype fp8_e4m3:
    kv_cache_dim 656 (calculate_mla_kv_cache_dim's scaled layout) or 576 (raw layout)."""
    from sglang.srt.mem_cache.memory_pool import DSATokenToKVPool
    from sglang.srt.runtime_context import get_parallel

    get_parallel().override_permanently(attn_dcp_size=1, attn_dcp_rank=0, dcp_enabled=False)
    return DSATokenToKVPool(
        size=size,
        page_size=PAGE,
        kv_lora_rank=512,
        dtype=FP8,
        qk_rope_head_dim=64,
        layer_num=LAYERS,
        device="cpu",
        index_head_dim=128,
        enable_memory_saver=False,
        kv_cache_dim=kv_cache_dim,
    )


def _latent(n: int, dtype: torch.dtype) -> torch.Tensor:
    """[n, 1, 576] c_kv | k_pe with per-column magnitudes over three decades."""
    col = torch.logspace(-2, 1, 576)[torch.randperm(576)]
    return (torch.randn(n, 1, 576) * col).to(dtype)


def test_interpreter_cast_is_why_the_cpu_quantizes_in_torch(exact_fp8_casts, monkeypatch):
    """The packed quantizer's torch twin (LatentLayout.quantize, what the CPU server runs)
    writes SGLang's bytes exactly once the interpreter casts right; with the interpreter's own
    cast SGLang's kernel writes other codes (the bug the twin avoids: when this starts to pass,
    a fixed Triton makes the hook unnecessary)."""
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout
    from sglang.kernels.ops.quantization.dsa_quant_k_cache import quantize_k_cache_separate
    from triton.runtime import interpreter

    k = _latent(200, torch.bfloat16)
    nope, rope = k[..., :512], k[..., 512:]
    twin = LatentLayout.packed_fp8().quantize(nope, rope)
    sglang = quantize_k_cache_separate(nope, rope)
    assert torch.equal(twin[0], sglang[0]) and torch.equal(twin[1], sglang[1])
    monkeypatch.undo()  # the interpreter's own cast again
    assert interpreter._convert_float.__name__ == "_convert_float"
    buggy = quantize_k_cache_separate(nope, rope)
    assert torch.equal(buggy[1], twin[1])  # bf16 rope: copied, not cast
    assert not torch.equal(buggy[0][..., :512], twin[0][..., :512])


def test_cpu_quantizer_hook_is_registered_and_dispatches(monkeypatch):
    from sglang_mx.attention.dsa import cpu as dsa_cpu
    from sglang_mx.attention.dsa import latent_cache

    seen = []
    monkeypatch.setattr(dsa_cpu, "hook", lambda target, fn, kind: seen.append((target, fn, kind)))
    dsa_cpu.register()
    assert (latent_cache.QUANTIZER, latent_cache.cpu_quantize_k_cache, "AROUND") in seen
    calls = []

    def original(*args, **kwargs):
        calls.append(args)
        return "sglang"

    k = _latent(3, torch.bfloat16)
    ours = latent_cache.cpu_quantize_k_cache(original, k[..., :512], k[..., 512:])
    assert calls == [] and ours[0].shape == (3, 1, 528) and ours[1].shape == (3, 1, 128)
    meta = torch.empty(3, 1, 512, device="meta")  # any non-CPU tensor: SGLang's kernel
    assert latent_cache.cpu_quantize_k_cache(original, meta, meta[..., :64]) == "sglang"


def test_layout_of_the_pools_sglang_builds():
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout
    from sglang_mx.attention.dsa import latent_cache

    packed = fp8_pool(128, 656)
    assert packed.dsa_kv_cache_store_fp8
    assert latent_cache.layout_of(packed) == LatentLayout.packed_fp8()
    raw = fp8_pool(128, 576)
    assert not raw.dsa_kv_cache_store_fp8
    assert latent_cache.layout_of(raw) == LatentLayout.plain()
    odd = SimpleNamespace(kv_lora_rank=512, qk_rope_head_dim=64, kv_cache_dim=600, dtype=FP8)
    with pytest.raises(ValueError, match="600 wide"):
        latent_cache.layout_of(odd)


WRITES = {  # layout name -> (kv_cache_dim, on HIP, latent dtype the model hands over)
    "packed-bf16": (656, False, torch.bfloat16),
    "packed-fp32": (656, False, torch.float32),  # --dtype float32: rope tail must go bf16
    "hip-plain": (576, True, torch.bfloat16),
    "cast-plain": (576, False, torch.bfloat16),
}


@pytest.mark.parametrize("case", list(WRITES))
def test_fp8_write_and_both_read_paths(case, exact_fp8_casts, monkeypatch):
    """SGLang's own write of each layout (its bytes checked against the layout's pack), then
    dense and DSA-sparse decode through the backend on the torch path (what the CPU serves) and
    the Triton path (the GPU's kernels, interpreted), against the float64 reference over the
    cache's bytes. Tolerance 1e-4 of the largest output (+ 1e-4): fp32 queries, both paths do
    fp32 math on the same dequantized values (the Triton kernel's packed dequant is one fp32
    product); the residue is fp32 rounding (2^-24) over 576-term scores of up to ~50 and their
    softmax, ~1e-5 of the output's scale; the plain FP8 Triton path too, once the interpreter
    widens bf16 subnormals right (exact_fp8_casts)."""
    from sgl_kernel_rocm.attention import mla_decode_ref
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout
    from sglang.srt.mem_cache import memory_pool
    from sglang_mx.attention.dsa import latent_cache, triton_path
    from sglang_mx.attention.dsa.index_k_pages import IndexKLayout

    dim, hip, dtype = WRITES[case]
    pool = fp8_pool(1024, dim)
    hip_writes = []
    if hip:
        monkeypatch.setattr(memory_pool, "_is_hip", True)
        real = memory_pool.set_mla_kv_buffer_triton_fp8_quant
        spy = lambda *a, **kw: hip_writes.append(a[-1]) or real(*a, **kw)  # noqa: E731
        monkeypatch.setattr(memory_pool, "set_mla_kv_buffer_triton_fp8_quant", spy)
    layout = latent_cache.layout_of(pool)
    assert layout.packed == (dim == 656)
    seq_lens = [100, 200, 300]  # one dense (< top-k), two sparse
    req_to_token = scattered_requests(pool, seq_lens)
    slots = req_to_token[req_to_token > 0].long()
    k = _latent(len(slots), dtype)
    layer = SimpleNamespace(layer_id=0, tp_q_head_num=4, v_head_dim=512, scaling=128**-0.5)
    kv = pool.get_key_buffer(0)
    kv.view(torch.uint8).fill_(0x7F)  # NaN codes: a row SGLang did not write would show
    latent_cache.write(pool, layer, slots, k, k[..., :512])
    if layout.packed:
        want = LatentLayout.packed_fp8().pack(k.squeeze(1).float()).view(FP8)
    else:
        want = k.squeeze(1).to(FP8)
    assert torch.equal(kv[slots, 0].view(torch.uint8), want.view(torch.uint8)), case
    assert hip_writes == ([memory_pool.fp8_dtype] if hip else [])  # SGLang's HIP kernel wrote

    buf = pool.get_index_k_with_scale_buffer(0)
    IndexKLayout(PAGE, 128).store(buf, slots, torch.randn(len(slots), 128))
    batch = decode_batch(seq_lens, req_to_token)
    q_index, weights = torch.randn(3, 4, 128), torch.rand(3, 4)
    q = torch.randn(3, 4 * 576)
    table = triton_path.block_table(req_to_token, PAGE)
    cache = triton_path.paged_latent(kv, PAGE)
    seq = torch.tensor(seq_lens, dtype=torch.int32)
    for triton in (False, True):
        backend = mx_dsa_backend(pool, req_to_token, triton, monkeypatch)
        backend.init_forward_metadata(batch)
        topk = backend.index_topk(q_index, weights, buf, batch, TOPK)
        for sel in (None, topk):
            extra = {} if sel is None else {"topk_indices": sel}
            out = backend.forward_decode(q, None, None, layer, batch, False, **extra)
            ref = mla_decode_ref(
                q.view(3, 4, 576), cache, table, seq, indices=sel, sm_scale=layer.scaling,
                layout=layout,
            )  # fmt: skip
            where = f"{case} triton={triton} sparse={sel is not None}"
            assert torch.isfinite(out).all(), where
            err = (out.view(3, 4, 512).double() - ref).abs()
            tol = 1e-4 * ref.abs().max() + 1e-4
            assert (err <= tol).all(), f"{where}: max err {float(err.max()):.2e}"
