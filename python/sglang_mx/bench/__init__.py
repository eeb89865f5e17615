"""Benchmark harness: an OpenAI-compatible load runner over measure's exact prefix-hit traces and
sweeps, cost, reports, claim verification, the roofline command and frontend-DSL agent workloads.

Modules stay import-light (no torch/sglang at module level) so `sglang-mx --help` is quick."""
