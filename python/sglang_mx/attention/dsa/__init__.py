"""The `mx_dsa` attention backend: MLA with DeepSeek Sparse Attention (GLM-5, DeepSeek-V3.2).

`backend` (the AttentionBackend SGLang creates), `indexer` (the DSA indexer's native forward and
GPU routing), `sparse_math` (the torch path and reference), `triton_path` (GPU decode on
sgl_kernel_rocm's kernels); the pool layouts they read and write (`latent_cache`: the latent
rows; `index_k_pages`: the FP8 index-key pages; `pool_layouts`: both, resolved once per pool);
`hadamard` (the indexer's rotation); `cpu` (the plugin-time hooks a DSA model needs on a CPU
box) and `name` (the backend's name, for the registry and those hooks). Nothing here is imported
at package import: SGLang's attention classes load only when a runner creates the backend.
"""
