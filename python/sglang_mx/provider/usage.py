"""Turn an upstream usage object into the billed OpenRouter usage: cached and cache-written
prompt tokens, cost, and cost_details (the billed parts, which sum to cost)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglang_mx.provider.pricing import ModelPricing


@dataclass
class TokenCounts:
    prompt: int = 0
    completion: int = 0
    cached: int = 0
    reasoning: int = 0

    def update(self, usage: dict[str, Any] | None) -> None:
        if not usage:
            return
        self.prompt = int(usage.get("prompt_tokens") or self.prompt)
        self.completion = int(usage.get("completion_tokens") or self.completion)
        details = usage.get("prompt_tokens_details") or {}
        self.cached = int(details.get("cached_tokens") or self.cached)
        cdetails = usage.get("completion_tokens_details") or {}
        self.reasoning = int(
            cdetails.get("reasoning_tokens") or usage.get("reasoning_tokens") or self.reasoning
        )

    def billed(self, model: ModelPricing) -> dict[str, Any]:
        cached = max(0, min(self.cached, self.prompt))
        parts = model.cost_parts(self.prompt, self.completion, self.cached)
        prompt_side = parts["prompt"] + parts["cached"]
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            # SGLang's radix cache stores every prompt token it computed: those are the writes.
            "prompt_tokens_details": {
                "cached_tokens": cached,
                "cache_write_tokens": self.prompt - cached,
            },
            "completion_tokens_details": {"reasoning_tokens": self.reasoning},
            "cost": float(sum(parts.values())),
            "cost_details": {
                "upstream_inference_cost": float(sum(parts.values())),
                "upstream_inference_prompt_cost": float(prompt_side),
                "upstream_inference_completions_cost": float(parts["completion"]),
                "prompt_cost": float(parts["prompt"]),
                "cached_prompt_cost": float(parts["cached"]),
                "completion_cost": float(parts["completion"]),
                "request_cost": float(parts["request"]),
            },
        }

    def cost(self, model: ModelPricing) -> float:
        return model.cost(self.prompt, self.completion, self.cached)
