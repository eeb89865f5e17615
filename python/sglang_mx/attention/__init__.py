"""SGLang attention backend `mx_triton`: our paged decode kernels, prefill delegated."""
