"""The serving self-check: before a process serves one of our kernels (the fused MXFP4 MoE,
mx_dsa's MLA / DSA decode and indexer, mx_triton's GQA decode), run it once at the model's
shapes against its torch reference on that device; an op whose kernel fails to build or
disagrees beyond its tolerance is left to the path that serves without it.

- tolerance: the bounds, the same ones the kernel tests state (and why);
- moe, mla, gqa: one case per kernel (inputs at given shapes, kernel vs reference);
- gate: what the takeover points call (shapes from the layer / model runner, once per shape,
  the log line, the record);
- record: the JSON record each process writes and `sglang-mx info` reads.
"""
