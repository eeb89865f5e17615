"""Our SGLang attention backends, registered lazily by `registry`: `mx_triton` (GQA/MHA decode
on paged Triton kernels, prefill delegated, `mx_triton.py`) and `mx_dsa` (MLA + DeepSeek Sparse
Attention, the `dsa` subpackage: backend, indexer, torch and Triton paths, page layouts and what
a DSA model needs on a CPU box); EAGLE's multi-step draft container over both
(`draft_steps`)."""
