"""Benchmark harness: exact prefix-hit workloads, an OpenAI-compatible load runner, sweeps, cost,
head-to-head reports, a roofline/capacity model and frontend-DSL agent workloads.

Modules stay import-light (no torch/sglang at module level) so `sglang-mx --help` is quick."""
