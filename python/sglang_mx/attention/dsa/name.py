"""The DSA backend's name on SGLang's `--attention-backend`, importable at plugin time (the
registry and the CPU hooks name it; the backend module itself loads SGLang's attention classes)."""

from __future__ import annotations

MX_DSA = "mx_dsa"  # MLA + DeepSeek Sparse Attention (backend.py)
