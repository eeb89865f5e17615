"""What the CPU platform binds for SGLang 0.5.23's HiCache (`sglang_mx/seam/hicache_cpu.py`), in
this process against SGLang's real host-pool modules: each transfer op a pool module calls is
bound where the name is missing and a bound name is left alone; the "cpu" host allocator gives
an unpinned tensor without calling CUDA; the free-memory reserve is 5% of RAM, at most SGLang's.
Each test puts SGLang's modules back as it found them. Serving: test_hicache_serving.py."""

from __future__ import annotations

import importlib

import torch
from sglang_mx._cpu_shims.kvcacheio_ops import OPS
from sglang_mx.seam import hicache_cpu

# The ops each host-pool module calls by bare name (read from SGLang 0.5.23's source: the
# `from sgl_kernel.kvcacheio import ...` under `if _is_cuda or _is_hip`).
CALLED = {
    "mla": {"transfer_kv_per_layer_mla", "transfer_kv_per_layer_mla_pf_lf",
            "transfer_kv_all_layer_mla", "transfer_kv_all_layer_mla_lf_pf", "transfer_kv_direct",
            "transfer_kv_per_layer_direct_pf_lf", "transfer_kv_all_layer_direct_lf_pf"},
    "dsa": {"transfer_kv_per_layer_mla", "transfer_kv_per_layer_mla_pf_lf",
            "transfer_kv_all_layer_mla", "transfer_kv_all_layer_mla_lf_pf", "transfer_kv_direct",
            "transfer_kv_per_layer_direct_pf_lf", "transfer_kv_all_layer_direct_lf_pf"},
    "mha": {"transfer_kv_per_layer", "transfer_kv_per_layer_pf_lf", "transfer_kv_all_layer",
            "transfer_kv_all_layer_lf_pf", "transfer_kv_direct",
            "transfer_kv_per_layer_direct_pf_lf", "transfer_kv_all_layer_direct_lf_pf",
            "transfer_kv_per_layer_mla", "transfer_kv_per_layer_mla_pf_lf",
            "transfer_kv_all_layer_mla_lf_pf"},
}  # fmt: skip


def test_transfer_ops_bound_where_missing_and_only_there(monkeypatch):
    modules = {n.rpartition(".")[2]: importlib.import_module(n) for n in hicache_cpu.POOL_MODULES}
    sentinel = object()
    monkeypatch.setattr(modules["mla"], "transfer_kv_direct", sentinel, raising=False)
    bound = hicache_cpu.bind_transfer_ops()
    try:
        for short, module in modules.items():
            for op in CALLED[short]:
                assert op in OPS, f"{short} calls {op}, which kvcacheio_ops lacks"
            for op in CALLED[short] - ({"transfer_kv_direct"} if short == "mla" else set()):
                assert vars(module)[op] is OPS[op], (short, op)
        assert modules["mla"].transfer_kv_direct is sentinel  # a present name is kept
        assert "mla.transfer_kv_direct" not in bound
    finally:
        for name in bound:
            short, _, op = name.partition(".")
            delattr(modules[short], op)


def test_cpu_host_allocation_is_not_pinned(monkeypatch):
    common = importlib.import_module(hicache_cpu.ALLOC_MODULE)
    monkeypatch.setitem(common.ALLOC_MEMORY_FUNCS, "cpu", common.ALLOC_MEMORY_FUNCS["cpu"])
    hicache_cpu.install_allocator()
    alloc = common.ALLOC_MEMORY_FUNCS["cpu"]
    assert alloc is hicache_cpu.alloc_host_tensor
    allocator = common.get_allocator_from_storage("default")
    t = alloc((4, 3), dtype=torch.bfloat16, device="cpu", pin_memory=True, allocator=allocator)
    assert t.shape == (4, 3) and t.device.type == "cpu" and not t.is_pinned()


def test_reserve_is_five_percent_of_ram_at_most_sglangs(monkeypatch):
    base = importlib.import_module(hicache_cpu.RESERVE_MODULE)
    assert base.HICACHE_HOST_MEMORY_RESERVE_BYTES == 10 * 1024**3 or hicache_cpu._bound
    gib = 1024**3
    assert hicache_cpu.cpu_reserve_bytes(24 * gib, 10 * gib) == int(24 * gib * 0.05)
    assert hicache_cpu.cpu_reserve_bytes(2048 * gib, 10 * gib) == 10 * gib
    monkeypatch.setattr(base, "HICACHE_HOST_MEMORY_RESERVE_BYTES", 10 * gib)
    reserve = hicache_cpu.install_reserve()
    assert base.HICACHE_HOST_MEMORY_RESERVE_BYTES == reserve <= 10 * gib
