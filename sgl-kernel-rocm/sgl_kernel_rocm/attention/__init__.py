"""Paged decode attention kernels: GQA, MLA (absorbed, FP8 latent) and DSA top-k sparse.

Each op is a public wrapper module (mla_decode, gqa_decode, dsa_decode, dsa_indexer, reduce,
topk_radix) over a private Triton body (`_<op>_kernels.py`), with its float64 torch reference
(`*_ref`) in reference.py; launch configs come from configs/decode_*/<arch>.json through
sgl_kernel_rocm.tuning.
"""

from __future__ import annotations

from sgl_kernel_rocm.attention.dsa_decode import dsa_sparse_decode
from sgl_kernel_rocm.attention.dsa_indexer import dsa_indexer, dsa_indexer_scores, select_topk
from sgl_kernel_rocm.attention.gqa_decode import gqa_decode
from sgl_kernel_rocm.attention.mla_decode import mla_decode
from sgl_kernel_rocm.attention.reduce import merge_splits
from sgl_kernel_rocm.attention.reference import (
    dsa_indexer_scores_ref,
    dsa_sparse_decode_ref,
    gqa_decode_ref,
    merge_splits_ref,
    mla_decode_ref,
)
from sgl_kernel_rocm.attention.topk_radix import select_topk_radix

__all__ = [
    "dsa_indexer",
    "dsa_indexer_scores",
    "dsa_indexer_scores_ref",
    "dsa_sparse_decode",
    "dsa_sparse_decode_ref",
    "gqa_decode",
    "gqa_decode_ref",
    "merge_splits",
    "merge_splits_ref",
    "mla_decode",
    "mla_decode_ref",
    "select_topk",
    "select_topk_radix",
]
