"""Torch versions of the `sgl_kernel.kvcacheio` transfer ops SGLang 0.5.23's hierarchical cache
(HiCache) calls to move KV pages between the device pool and the host pool
(`mem_cache/pool_host/mla.py`, `dsa.py`, `mha.py`). Those modules bind the ops only under
CUDA/HIP (XPU: `pool_host/_kvcacheio.py`); on the CPU platform `seam/hicache_cpu.py` binds these.

Each op keeps the contract of the CUDA kernel of the same name (argument names and order as
SGLang passes them): rows of `item_size` bytes, addressed by index. `src_indices[i]` names the
row read and `dst_indices[i]` the row written. Layer-first buffers hold one row every
`item_size` bytes. Page-first buffers (`*_pf_*`) hold one row of all layers every `layout_dim`
bytes, with layer `l` at byte `l * item_size` of it. The all-layer ops take their layer-first
side as a uint64 table of base addresses, as the CUDA kernels do. On a CPU those addresses are
host memory of this process, viewed in place here (`_at`). The `direct` ops take tensors and
copy whole rows along their first dimension; the page-first direct layout is
`[page, layer, page_size, ...]`. The copies are synchronous. A CPU has no copy engine to overlap,
so the order of SGLang's (no-op) CPU streams and events is the program order.

Not here: the page-head layout (`*_ph_*`, `--hicache-mem-layout page_head`), which SGLang uses for
MHA models with head-sharded storage; calling it raises through the stand-in, naming itself."""

from __future__ import annotations

import ctypes

import torch

_U8 = torch.uint8


def _idx(indices: torch.Tensor) -> torch.Tensor:
    return indices.reshape(-1).to(torch.int64)


def _bytes_of(tensor: torch.Tensor) -> tuple[torch.Tensor, int]:
    """A flat uint8 view of `tensor`'s whole storage and the byte offset where `tensor` starts
    (writes through the view land in `tensor`)."""
    storage = tensor.untyped_storage()
    flat = torch.empty(0, dtype=_U8).set_(storage)
    return flat, tensor.storage_offset() * tensor.element_size()


def _at(address: int, nbytes: int) -> torch.Tensor:
    """A writable uint8 view of `nbytes` of this process's memory from `address`."""
    if nbytes <= 0:
        return torch.empty(0, dtype=_U8)
    return torch.frombuffer((ctypes.c_ubyte * nbytes).from_address(address), dtype=_U8)


def _rows(flat: torch.Tensor, offset: int, n_rows: int, stride: int, width: int) -> torch.Tensor:
    """`n_rows` rows of `width` bytes, one every `stride` bytes from byte `offset` of `flat`."""
    needed = offset + (n_rows - 1) * stride + width if n_rows else offset
    if needed > flat.numel():
        raise IndexError(
            f"kvcacheio (CPU): a row index reaches byte {needed} of a {flat.numel()}-byte buffer"
        )
    return flat.as_strided((n_rows, width), (stride, 1), offset)


def _tensor_rows(t: torch.Tensor, indices: torch.Tensor, stride: int, width: int, offset=0):
    flat, base = _bytes_of(t)
    n = int(indices.max()) + 1 if indices.numel() else 0
    return _rows(flat, base + offset, n, stride, width)


def _address_rows(address: int, indices: torch.Tensor, stride: int, width: int, offset=0):
    n = int(indices.max()) + 1 if indices.numel() else 0
    extent = offset + (n - 1) * stride + width if n else 0
    return _rows(_at(address, extent), offset, n, stride, width)


def _copy(src_rows: torch.Tensor, dst_rows: torch.Tensor, src_key, dst_key) -> None:
    """dst_rows[dst_key] = src_rows[src_key] (a key: an index tensor, or a tuple of them)."""
    n_src = (src_key[0] if isinstance(src_key, tuple) else src_key).numel()
    n_dst = (dst_key[0] if isinstance(dst_key, tuple) else dst_key).numel()
    if n_src != n_dst:
        raise ValueError(f"kvcacheio (CPU): {n_src} source rows for {n_dst} destination rows")
    if n_src:
        dst_rows[dst_key] = src_rows[src_key]


def _addresses(table: torch.Tensor) -> list[int]:
    return [a & 0xFFFFFFFFFFFFFFFF for a in table.reshape(-1).view(torch.int64).tolist()]


# --- kernel io backend, MLA (one buffer per layer) ------------------------------------------


def transfer_kv_per_layer_mla(src, dst, src_indices, dst_indices, item_size, *_):
    s, d = _idx(src_indices), _idx(dst_indices)
    _copy(_tensor_rows(src, s, item_size, item_size), _tensor_rows(dst, d, item_size, item_size),
          s, d)  # fmt: skip


def transfer_kv_per_layer_mla_pf_lf(
    src, dst, src_indices, dst_indices, layer_id, item_size, src_layout_dim, *_
):
    s, d = _idx(src_indices), _idx(dst_indices)
    src_rows = _tensor_rows(src, s, src_layout_dim, item_size, layer_id * item_size)
    _copy(src_rows, _tensor_rows(dst, d, item_size, item_size), s, d)


def transfer_kv_all_layer_mla(
    src_layers, dst_layers, src_indices, dst_indices, item_size, num_layers, *_
):
    s, d = _idx(src_indices), _idx(dst_indices)
    srcs, dsts = _addresses(src_layers), _addresses(dst_layers)
    for layer in range(num_layers):
        _copy(_address_rows(srcs[layer], s, item_size, item_size),
              _address_rows(dsts[layer], d, item_size, item_size), s, d)  # fmt: skip


def transfer_kv_all_layer_mla_lf_pf(
    src_layers, dst, src_indices, dst_indices, item_size, dst_layout_dim, num_layers, *_
):
    s, d = _idx(src_indices), _idx(dst_indices)
    srcs = _addresses(src_layers)
    for layer in range(num_layers):
        dst_rows = _tensor_rows(dst, d, dst_layout_dim, item_size, layer * item_size)
        _copy(_address_rows(srcs[layer], s, item_size, item_size), dst_rows, s, d)


# --- kernel io backend, MHA (a K and a V buffer per layer) -----------------------------------


def transfer_kv_per_layer(src_k, dst_k, src_v, dst_v, src_indices, dst_indices, item_size, *_):
    transfer_kv_per_layer_mla(src_k, dst_k, src_indices, dst_indices, item_size)
    transfer_kv_per_layer_mla(src_v, dst_v, src_indices, dst_indices, item_size)


def transfer_kv_per_layer_pf_lf(
    src_k, dst_k, src_v, dst_v, src_indices, dst_indices, layer_id, item_size, src_layout_dim, *_
):
    for src, dst in ((src_k, dst_k), (src_v, dst_v)):
        transfer_kv_per_layer_mla_pf_lf(
            src, dst, src_indices, dst_indices, layer_id, item_size, src_layout_dim
        )


def transfer_kv_all_layer(
    src_k_layers, dst_k_layers, src_v_layers, dst_v_layers, src_indices, dst_indices,
    item_size, num_layers, *_,
):  # fmt: skip
    for src, dst in ((src_k_layers, dst_k_layers), (src_v_layers, dst_v_layers)):
        transfer_kv_all_layer_mla(src, dst, src_indices, dst_indices, item_size, num_layers)


def transfer_kv_all_layer_lf_pf(
    src_k_layers, dst_k, src_v_layers, dst_v, src_indices, dst_indices, item_size,
    dst_layout_dim, num_layers, *_,
):  # fmt: skip
    for src, dst in ((src_k_layers, dst_k), (src_v_layers, dst_v)):
        transfer_kv_all_layer_mla_lf_pf(
            src, dst, src_indices, dst_indices, item_size, dst_layout_dim, num_layers
        )


# --- direct io backend (tensors, whole rows along the first dimension) -----------------------


def _row_view(t: torch.Tensor) -> torch.Tensor:
    """`t` as (rows, bytes per row), sharing its memory (rows along dim 0 must be packed)."""
    width = t[0].numel() * t.element_size() if t.shape[0] else 0
    if t.shape[0] and not t[0].is_contiguous():
        raise ValueError("kvcacheio (CPU): direct transfer needs packed rows")
    flat, base = _bytes_of(t)
    return _rows(flat, base, t.shape[0], t.stride(0) * t.element_size(), width)


def transfer_kv_direct(src_layers, dst_layers, src_indices, dst_indices, page_size):
    s, d = _idx(src_indices), _idx(dst_indices)
    if len(src_layers) != len(dst_layers):
        raise ValueError(f"kvcacheio (CPU): {len(src_layers)} source layers, {len(dst_layers)}")
    for src, dst in zip(src_layers, dst_layers, strict=True):
        _copy(_row_view(src), _row_view(dst), s, d)


def _page_first_rows(t: torch.Tensor, layer_id: int, page_size: int, indices: torch.Tensor):
    """Layer `layer_id` of a `[page, layer, page_size, ...]` tensor as (page, row in page,
    bytes), and the (page, row) keys of token `indices` (token = page * page_size + row)."""
    if t.shape[2] != page_size or not t[0, 0, 0].is_contiguous():
        raise ValueError(f"kvcacheio (CPU): not a page-first direct buffer: {tuple(t.shape)}")
    flat, base = _bytes_of(t)
    size = t.element_size()
    width = t[0, 0, 0].numel() * size
    base += layer_id * t.stride(1) * size
    pages = int(indices.max()) // page_size + 1 if indices.numel() else 0
    if pages > t.shape[0]:
        raise IndexError(f"kvcacheio (CPU): page {pages - 1} of a {t.shape[0]}-page buffer")
    view = flat.as_strided(
        (pages, page_size, width), (t.stride(0) * size, t.stride(2) * size, 1), base
    )
    return view, (indices // page_size, indices % page_size)


def transfer_kv_per_layer_direct_pf_lf(
    src_ptrs, dst_ptrs, src_indices, dst_indices, layer_id, page_size
):
    s, d = _idx(src_indices), _idx(dst_indices)
    for src, dst in zip(src_ptrs, dst_ptrs, strict=True):
        src_view, src_key = _page_first_rows(src, layer_id, page_size, s)
        _copy(src_view, _row_view(dst), src_key, d)


def transfer_kv_all_layer_direct_lf_pf(src_ptrs, dst_ptrs, src_indices, dst_indices, page_size):
    s, d = _idx(src_indices), _idx(dst_indices)
    if len(src_ptrs) % len(dst_ptrs):
        raise ValueError(
            f"kvcacheio (CPU): {len(src_ptrs)} source layers do not split over "
            f"{len(dst_ptrs)} destination buffers"
        )
    num_layers = len(src_ptrs) // len(dst_ptrs)
    for j, dst in enumerate(dst_ptrs):
        for layer in range(num_layers):
            dst_view, dst_key = _page_first_rows(dst, layer, page_size, d)
            _copy(_row_view(src_ptrs[j * num_layers + layer]), dst_view, s, dst_key)


OPS = {
    fn.__name__: fn
    for fn in (
        transfer_kv_per_layer_mla,
        transfer_kv_per_layer_mla_pf_lf,
        transfer_kv_all_layer_mla,
        transfer_kv_all_layer_mla_lf_pf,
        transfer_kv_per_layer,
        transfer_kv_per_layer_pf_lf,
        transfer_kv_all_layer,
        transfer_kv_all_layer_lf_pf,
        transfer_kv_direct,
        transfer_kv_per_layer_direct_pf_lf,
        transfer_kv_all_layer_direct_lf_pf,
    )
}
