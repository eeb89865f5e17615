"""Prometheus metrics of one provider app, in its own registry (tests build several apps)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class ProviderMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "provider_requests", "Requests finished", ["model", "endpoint", "status"], registry=r
        )
        self.prompt_tokens = Counter(
            "provider_prompt_tokens", "Prompt tokens", ["model"], registry=r
        )
        self.completion_tokens = Counter(
            "provider_completion_tokens", "Completion tokens", ["model"], registry=r
        )
        self.cached_tokens = Counter(
            "provider_cached_tokens",
            "Prompt tokens served from the prefix cache",
            ["model"],
            registry=r,
        )
        self.cost = Counter("provider_cost_usd", "USD billed", ["model"], registry=r)
        self.ttft = Histogram(
            "provider_ttft_seconds",
            "Time to first token",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "provider_inter_token_seconds",
            "Gap between streamed chunks",
            ["model"],
            buckets=_ITL_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "provider_errors", "Errors by status code", ["code", "reason"], registry=r
        )

    def record_usage(
        self, model: str, prompt: int, completion: int, cached: int, cost: float
    ) -> None:
        self.prompt_tokens.labels(model).inc(prompt)
        self.completion_tokens.labels(model).inc(completion)
        self.cached_tokens.labels(model).inc(cached)
        self.cost.labels(model).inc(cost)

    def render(self) -> bytes:
        return generate_latest(self.registry)
