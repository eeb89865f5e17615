"""Our SGLang attention backends, one module each: `mx_triton` (GQA/MHA decode on paged Triton
kernels, prefill delegated) and `mx_dsa` (MLA + DeepSeek Sparse Attention), registered lazily by
`registry`; the DSA indexer (`dsa_indexer`), its math, kernels glue and page layout; and what a
DSA model needs on a CPU box (`dsa_cpu`)."""
