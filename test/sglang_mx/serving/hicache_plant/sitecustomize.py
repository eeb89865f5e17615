"""Planted HiCache restore breaks for test_hicache_serving, active only in a server started with
this folder on PYTHONPATH and SGLANG_MX_PLANT_HICACHE naming a file. Each host-to-device load
reads that file: empty, the load is SGLang's; otherwise it names the break, so one server serves
the honest check and its planted ones:

- `slot`: the latent pages land one page off (the device slots of the load rotated by a page);
- `index`: the DSA index-key pages are not restored (the load of the indexer pool does nothing);
- `draft`: the NextN draft's pages (latent and index keys) are not restored.

Python imports `sitecustomize` at start in every process of the server; the SGLang classes are
patched when the CPU platform binds HiCache (`sglang_mx.seam.hicache_cpu.bind`, in the
scheduler), so nothing of SGLang is imported early."""

import os

_FILE = os.environ.get("SGLANG_MX_PLANT_HICACHE")


def _mode() -> str:
    try:
        with open(_FILE) as f:
            return f.read().strip()
    except OSError:
        return ""


def _patch() -> None:
    from sglang.srt.mem_cache.pool_host.dsa import DSAIndexerPoolHost
    from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost

    latent_load = MLATokenToKVPoolHost.load_to_device_per_layer
    index_load = DSAIndexerPoolHost.load_to_device_per_layer

    def planted_latent(self, device_pool, host_indices, device_indices, layer_id, io_backend,
                       *, is_draft=False):  # fmt: skip
        mode = _mode()
        if mode == "draft" and is_draft:
            return None
        if mode == "slot" and not is_draft and device_indices.numel() > self.page_size:
            device_indices = device_indices.roll(self.page_size)
        return latent_load(self, device_pool, host_indices, device_indices, layer_id,
                           io_backend, is_draft=is_draft)  # fmt: skip

    def planted_index(self, device_pool, host_indices, device_indices, layer_id, io_backend,
                      *, is_draft=False):  # fmt: skip
        mode = _mode()
        if mode == "index" and not is_draft or mode == "draft" and is_draft:
            return None
        return index_load(self, device_pool, host_indices, device_indices, layer_id,
                          io_backend, is_draft=is_draft)  # fmt: skip

    MLATokenToKVPoolHost.load_to_device_per_layer = planted_latent
    DSAIndexerPoolHost.load_to_device_per_layer = planted_index


if _FILE:
    from sglang_mx.seam import hicache_cpu

    _bind = hicache_cpu.bind

    def _planted_bind() -> None:
        first = not getattr(hicache_cpu, "_planted", False)
        _bind()
        if first:  # the target and the draft model runner each call bind()
            hicache_cpu._planted = True
            _patch()

    hicache_cpu.bind = _planted_bind
