"""Agent workloads written with the SGLang frontend DSL (`import sglang as sgl`): a tool-using
agent loop, a fork/join review over one shared document, a multi-turn chat. Each runs as an
example (`python -m sglang_mx.bench.agents.<name> --url URL`), reports its prefix-cache hit rate
and the speedup over the same calls without prefix reuse, and can be recorded as a trace.

Stands on load alone (prompts), the one room below it."""
