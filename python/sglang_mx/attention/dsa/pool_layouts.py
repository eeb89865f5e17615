"""The layouts of one DSA KV pool as mx_dsa reads it, resolved once per pool rather than per layer.

`latent`: the latent rows' LatentLayout (`latent_cache.layout_of`, which checks the rows' width
against it and logs it once); `index_k`: the FP8 index-key pages' IndexKLayout (SGLang's
`index_page_size`, the page size when the pool has none, and `index_head_dim`). Each is resolved
the first time it is asked for, so a pool without index keys (MLA without DSA) never needs one.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from sglang_mx.attention.dsa import latent_cache
from sglang_mx.attention.dsa.index_k_pages import IndexKLayout

if TYPE_CHECKING:
    from sgl_kernel_rocm.attention.latent_layout import LatentLayout


class PoolLayouts:
    """`pool`'s latent and index-key layouts (`page_size`: the backend's, the index page
    size when the pool names none)."""

    def __init__(self, pool: Any, page_size: int) -> None:
        self.pool = pool
        self.page_size = page_size

    @cached_property
    def latent(self) -> LatentLayout:
        return latent_cache.layout_of(self.pool)

    @cached_property
    def index_k(self) -> IndexKLayout:
        page = int(getattr(self.pool, "index_page_size", self.page_size))
        return IndexKLayout(page, int(self.pool.index_head_dim))
