"""The CPU `kvcacheio` transfer ops HiCache calls on the CPU platform
(`sglang_mx/_cpu_shims/kvcacheio_ops.py`) move the rows their CUDA kernels' contract names. The
reference is tensor indexing in the pools' own shapes, not byte arithmetic: a device layer
`[size, 1, dim]`, a layer-first host pool `[layer, size, 1, dim]`, a page-first one
`[size, layer, 1, dim]`, a page-first-direct one `[page, layer, page_size, 1, dim]`, with
SGLang 0.5.23's `item_size` / `layout_dim` arguments as its host pools compute them
(`pool_host/mla.py`: `token_stride_size = dim * itemsize`, `layout_dim = token_stride_size *
layer_num`). Fresh random rows and slot maps each run; rows not named must stay untouched."""

from __future__ import annotations

import pytest
import torch
from sglang_mx._cpu_shims import kvcacheio_ops as ops

LAYERS, SIZE, DIM, PAGE = 3, 96, 40, 8
DTYPES = [torch.bfloat16, torch.float8_e4m3fn, torch.uint8, torch.float32]


def rand(shape, dtype):
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=torch.uint8)
    return torch.randn(shape).to(dtype)


def same(a, b) -> bool:
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def slots(n: int, pages: bool = False):
    """n source and destination slots, distinct and shuffled; whole pages when `pages`."""
    if not pages:
        return torch.randperm(SIZE)[:n], torch.randperm(SIZE)[:n]

    def pick():
        p = torch.randperm(SIZE // PAGE)[: n // PAGE]
        return (p[:, None] * PAGE + torch.arange(PAGE)).reshape(-1)

    return pick(), pick()


def device_layers(dtype):
    return [rand((SIZE, 1, DIM), dtype) for _ in range(LAYERS)]


def ptrs(tensors):
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.uint64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_first_mla_both_ways(dtype):
    dev, host = device_layers(dtype), rand((LAYERS, SIZE, 1, DIM), dtype)
    before = host.clone()
    src, dst = slots(37)
    item = DIM * dtype.itemsize
    ops.transfer_kv_all_layer_mla(ptrs(dev), ptrs(list(host)), src, dst, item, LAYERS)
    for layer in range(LAYERS):
        assert same(host[layer][dst], dev[layer][src])
    untouched = torch.ones(SIZE, dtype=torch.bool)
    untouched[dst] = False
    assert same(host[:, untouched], before[:, untouched])

    back = device_layers(dtype)
    for layer in range(LAYERS):
        ops.transfer_kv_per_layer_mla(host[layer], back[layer], dst, src, item)
        assert same(back[layer][src], dev[layer][src])


@pytest.mark.parametrize("dtype", DTYPES)
def test_page_first_mla_both_ways(dtype):
    dev, host = device_layers(dtype), rand((SIZE, LAYERS, 1, DIM), dtype)
    src, dst = slots(29)
    item = DIM * dtype.itemsize
    ops.transfer_kv_all_layer_mla_lf_pf(ptrs(dev), host, src, dst, item, item * LAYERS, LAYERS)
    for layer in range(LAYERS):
        assert same(host[dst, layer], dev[layer][src])
    back = device_layers(dtype)
    for layer in range(LAYERS):
        ops.transfer_kv_per_layer_mla_pf_lf(host, back[layer], dst, src, layer, item,
                                            item * LAYERS)  # fmt: skip
        assert same(back[layer][src], dev[layer][src])
        other = torch.ones(SIZE, dtype=torch.bool)
        other[src] = False
        assert not same(back[layer][other], dev[layer][other])  # fresh random rows elsewhere


def test_dsa_index_pages_move_as_page_rows():
    """The DSA indexer host pool (pool_host/dsa.py) moves one uint8 row per page: page indices,
    item_size = the page's bytes (index keys + scales)."""
    page_bytes = PAGE * 132
    pages = SIZE // PAGE
    dev = [rand((pages, page_bytes), torch.uint8) for _ in range(LAYERS)]
    host = rand((pages + 1, LAYERS, 1, page_bytes), torch.uint8)
    src, dst = torch.randperm(pages)[:5], torch.randperm(pages + 1)[:5]
    ops.transfer_kv_all_layer_mla_lf_pf(ptrs(dev), host, src, dst, page_bytes,
                                        page_bytes * LAYERS, LAYERS)  # fmt: skip
    back = [torch.zeros_like(d) for d in dev]
    for layer in range(LAYERS):
        assert same(host[dst, layer, 0], dev[layer][src])
        ops.transfer_kv_per_layer_mla_pf_lf(host, back[layer], dst, src, layer, page_bytes,
                                            page_bytes * LAYERS)  # fmt: skip
        assert same(back[layer][src], dev[layer][src])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_mha_k_and_v(dtype):
    k, v = device_layers(dtype), device_layers(dtype)
    hk, hv = rand((SIZE, LAYERS, 1, DIM), dtype), rand((SIZE, LAYERS, 1, DIM), dtype)
    src, dst = slots(16)
    item = DIM * dtype.itemsize
    ops.transfer_kv_all_layer_lf_pf(ptrs(k), hk, ptrs(v), hv, src, dst, item, item * LAYERS,
                                    LAYERS)  # fmt: skip
    bk, bv = device_layers(dtype), device_layers(dtype)
    for layer in range(LAYERS):
        assert same(hk[dst, layer], k[layer][src]) and same(hv[dst, layer], v[layer][src])
        ops.transfer_kv_per_layer_pf_lf(hk, bk[layer], hv, bv[layer], dst, src, layer, item,
                                        item * LAYERS)  # fmt: skip
        assert same(bk[layer][src], k[layer][src]) and same(bv[layer][src], v[layer][src])
    lk, lv = rand((LAYERS, SIZE, 1, DIM), dtype), rand((LAYERS, SIZE, 1, DIM), dtype)
    ops.transfer_kv_all_layer(ptrs(k), ptrs(list(lk)), ptrs(v), ptrs(list(lv)), src, dst, item,
                              LAYERS)  # fmt: skip
    for layer in range(LAYERS):
        assert same(lk[layer][dst], k[layer][src]) and same(lv[layer][dst], v[layer][src])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_direct_layer_first_and_page_first(dtype):
    dev = device_layers(dtype)
    src, dst = slots(3 * PAGE, pages=True)
    host = [rand((SIZE, 1, DIM), dtype) for _ in range(LAYERS)]
    ops.transfer_kv_direct(dev, host, src, dst, PAGE)
    for layer in range(LAYERS):
        assert same(host[layer][dst], dev[layer][src])

    paged = rand((SIZE // PAGE, LAYERS, PAGE, 1, DIM), dtype)
    ops.transfer_kv_all_layer_direct_lf_pf(dev, [paged], src, dst, PAGE)
    for layer in range(LAYERS):
        assert same(paged[dst // PAGE, layer, dst % PAGE], dev[layer][src])
        back = rand((SIZE, 1, DIM), dtype)
        ops.transfer_kv_per_layer_direct_pf_lf([paged], [back], dst, src, layer, PAGE)
        assert same(back[src], dev[layer][src])


def test_bad_calls_name_the_problem():
    dev, host = device_layers(torch.bfloat16), rand((LAYERS, SIZE, 1, DIM), torch.bfloat16)
    item = DIM * 2
    with pytest.raises(ValueError, match="3 source rows for 2 destination rows"):
        ops.transfer_kv_per_layer_mla(dev[0], host[0], torch.arange(3), torch.arange(2), item)
    with pytest.raises(IndexError, match="byte"):
        ops.transfer_kv_per_layer_mla(dev[0], host[0], torch.tensor([SIZE]), torch.tensor([0]),
                                      item)  # fmt: skip
