"""The mx_dsa backend's two paths on SGLang's real DSATokenToKVPool (page 64), no server.

- Index-key pages: our torch writer/reader and SGLang's own Triton writer (SetKAndS, run by
  the Triton interpreter here) produce and read the same bytes, and our scales are SGLang's
  act_quant(ue8m0) scales. (Its FP8 values are not compared: the Triton interpreter's fp32 ->
  e4m3 cast rounds some values to the wrong binade, e.g. -127.4 -> -64; torch's cast rounds to
  nearest-even like the GPU's.)
- GPU decode path (sgl_kernel_rocm's Triton indexer, MLA and DSA sparse kernels, run through
  TRITON_INTERPRET=1 as conftest sets it) against the torch path (what the CPU serves), both
  driven through the backend class on the same pool tensors: same top-k sets, same outputs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from dsa_pool_support import PAGE, decode_batch, dsa_pool, mx_dsa_backend, scattered_requests

LAYERS = 2
TOPK = 128


@pytest.fixture(scope="module")
def pool():
    return dsa_pool(size=1024, layers=LAYERS)


def test_index_key_pages_match_sglang_writer(pool):
    from sglang.kernels.ops.quantization.act_quant_triton import act_quant
    from sglang_mx.attention.dsa import index_k_pages

    torch.manual_seed(0)
    key = torch.randn(70, 128) * torch.logspace(-2, 1, 70).unsqueeze(1)
    loc = torch.randperm(pool.size)[:70] + PAGE  # slot 0..63 is SGLang's padding page
    buf = pool.get_index_k_with_scale_buffer(0)
    buf.zero_()
    _, sglang_scale = act_quant(key, 128, "ue8m0")
    k_fp8, k_scale = index_k_pages.quantize(key)
    assert torch.equal(k_scale, sglang_scale.view(-1))
    pool.set_index_k_scale_buffer(0, loc, k_fp8.contiguous(), k_scale.view(-1, 1).contiguous())
    ours = torch.zeros_like(buf)
    index_k = index_k_pages.IndexKLayout(pool.index_page_size, 128)
    index_k.store(ours, loc, key)
    assert torch.equal(ours, buf)
    back = index_k_pages.IndexKLayout(PAGE, 128).load(buf, loc)
    assert torch.equal(back, k_fp8.float() * k_scale.view(-1, 1))


def test_triton_decode_path_matches_torch_path(pool, monkeypatch):
    from sglang_mx.attention.dsa import index_k_pages

    torch.manual_seed(1)
    seq_lens = [100, 200, 300]  # one dense (< top-k), two sparse
    req_to_token = scattered_requests(pool, seq_lens)
    layer = SimpleNamespace(layer_id=0, tp_q_head_num=4, v_head_dim=512, scaling=128**-0.5)
    kv = pool.get_key_buffer(0)
    kv.copy_(torch.randn_like(kv))
    buf = pool.get_index_k_with_scale_buffer(0)
    all_slots = req_to_token[req_to_token > 0].long()
    index_k_pages.IndexKLayout(PAGE, 128).store(buf, all_slots, torch.randn(len(all_slots), 128))

    batch = decode_batch(seq_lens, req_to_token)
    q_index = torch.randn(3, 4, 128)
    weights = torch.rand(3, 4)
    q = torch.randn(3, 4 * 576)
    outs = {}
    for triton in (False, True):
        backend = mx_dsa_backend(pool, req_to_token, triton, monkeypatch)
        backend.init_forward_metadata(batch)
        assert (backend.table is not None) == triton
        topk = backend.index_topk(q_index, weights, buf, batch, TOPK)
        dense = backend.forward_decode(q, None, None, layer, batch, save_kv_cache=False)
        sparse = backend.forward_decode(
            q, None, None, layer, batch, save_kv_cache=False, topk_indices=topk
        )
        outs[triton] = (topk, dense, sparse)
    (t_topk, t_dense, t_sparse), (g_topk, g_dense, g_sparse) = outs[False], outs[True]
    for r, n in enumerate(seq_lens):
        assert set(t_topk[r].tolist()) == set(g_topk[r].tolist())
        assert int((t_topk[r] >= 0).sum()) == min(n, TOPK)
    torch.testing.assert_close(g_dense, t_dense, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(g_sparse, t_sparse, atol=1e-4, rtol=1e-4)
    # Sparsity is real: past top-k the sparse output is not the dense one.
    assert not torch.allclose(t_sparse[1:], t_dense[1:], atol=1e-3)
    torch.testing.assert_close(t_sparse[0], t_dense[0], atol=1e-5, rtol=1e-5)


def test_the_backend_resolves_the_pool_layouts_once(pool, monkeypatch):
    """latent_cache.layout_of (with its width checks) runs once per pool the backend serves, not
    per layer per step; a pool swapped in is resolved afresh."""
    from sglang_mx.attention.dsa import latent_cache
    from sglang_mx.attention.dsa.index_k_pages import IndexKLayout

    seen = []
    layout_of = latent_cache.layout_of
    monkeypatch.setattr(latent_cache, "layout_of", lambda p: seen.append(p) or layout_of(p))
    seq_lens = [70, 130]
    req_to_token = scattered_requests(pool, seq_lens)
    batch = decode_batch(seq_lens, req_to_token)
    backend = mx_dsa_backend(pool, req_to_token, False, monkeypatch)
    q = torch.randn(len(seq_lens), 4 * 576)
    for _step in range(2):
        backend.init_forward_metadata(batch)
        for layer_id in range(LAYERS):
            layer = SimpleNamespace(layer_id=layer_id, tp_q_head_num=4, scaling=128**-0.5)
            backend.forward_decode(q, None, None, layer, batch, save_kv_cache=False)
    assert len(seen) == 1 and seen[0] is pool
    assert backend.index_k_layout() == IndexKLayout(PAGE, 128)
    other = dsa_pool(size=256, layers=1)
    backend.token_to_kv_pool = other
    assert backend.layouts().latent == layout_of(other)
    assert len(seen) == 2 and seen[1] is other


def test_gpu_indexer_dispatch_goes_to_mx_dsa(monkeypatch):
    """On an in-tree GPU platform SGLang calls Indexer.forward_cuda; with mx_dsa active our
    forward must run instead (else SGLang's returns no top-k and attention goes dense)."""
    from sglang.srt.layers.attention.dsa.dsa_indexer import Indexer
    from sglang.srt.model_executor import forward_context
    from sglang_mx.attention.dsa import indexer as dsa_indexer

    reached = []

    def sglang_forward_cuda(self, *args, **kwargs):  # stands in for SGLang's CUDA forward
        reached.append(kwargs)
        return "sglang"

    # Our wrapper goes around whatever forward_cuda is installed: here the stand-in, so the
    # test sees which one ran (monkeypatch restores SGLang's after the test).
    monkeypatch.setattr(Indexer, "forward_cuda", sglang_forward_cuda)
    dsa_indexer.route_gpu_indexer()
    assert Indexer.forward_cuda is not sglang_forward_cuda
    calls = []
    monkeypatch.setattr(
        dsa_indexer, "indexer_forward_native", lambda self, *a, **k: calls.append(k) or "ours"
    )
    monkeypatch.setattr(
        forward_context, "get_attn_backend", lambda: SimpleNamespace(index_topk=None)
    )
    assert Indexer.forward_cuda(object(), layer_id=3) == "ours"
    assert calls == [{"layer_id": 3}] and reached == []
    # Any other backend: SGLang's own forward_cuda runs, with the arguments unchanged.
    monkeypatch.setattr(forward_context, "get_attn_backend", lambda: SimpleNamespace())
    assert Indexer.forward_cuda(object(), layer_id=3) == "sglang"
    assert reached == [{"layer_id": 3}] and calls == [{"layer_id": 3}]
