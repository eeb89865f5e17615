"""sglang_mx: SGLang 0.5.23 extension for MXFP4 MoE serving (plugin, provider, bench)."""

from __future__ import annotations

__version__ = "0.1.0"
