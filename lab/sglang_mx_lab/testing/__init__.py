"""Helpers for tests and benchmarks that need real processes (SGLang servers)."""
