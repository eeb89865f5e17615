"""Turn an upstream usage object into the billed OpenRouter usage (cached tokens, cost)."""

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
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "prompt_tokens_details": {"cached_tokens": self.cached},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning},
            "cost": self.cost(model),
        }

    def cost(self, model: ModelPricing) -> float:
        return model.cost(self.prompt, self.completion, self.cached)
