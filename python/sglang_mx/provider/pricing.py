"""Per-model pricing and listing data: load the pricing file(s), compute a request's cost, and
derive a floor price from $/GPU-hour and a measured throughput.

A pricing file is JSON: one model object, or {"models": [...]}; a directory holds one file per
model. Prices are USD per million tokens (`usd_per_m`); /v1/models shows them per token
(`provider/listing.py`)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from pathlib import Path
from typing import Any

# OpenRouter's current provider format (schema 2.4); the legacy flat format knows the first eight.
QUANTIZATIONS = (
    "int4", "int8", "fp4", "fp6", "fp8", "fp16", "bf16", "fp32", "mxfp4", "nvfp4", "mxfp8",
)  # fmt: skip
# Declared throughput (pricing file `capacity`, all optional) -> 2.4 capacity scope and type.
CAPACITY_FIELDS = {
    "prompt_tokens_per_minute": ("input", "prompt"),
    "completion_tokens_per_minute": ("output", "completion"),
    "requests_per_minute": ("root", "request"),
    "concurrency": ("root", "concurrency"),
}
SAMPLING_PARAMETERS = (
    "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "frequency_penalty",
    "presence_penalty", "stop", "seed", "max_tokens", "logit_bias",
)  # fmt: skip
PRICE_FIELDS = ("prompt", "completion", "input_cache_read", "input_cache_write", "request", "image")


_ZERO = Decimal(0)


@dataclass(frozen=True)
class ModelPricing:
    id: str
    usd_per_m: dict[str, float]
    context_length: int
    max_completion_tokens: int
    upstream_model: str = ""  # name the upstream serves it under; defaults to id
    name: str = ""
    description: str = ""
    hugging_face_id: str = ""
    quantization: str | None = None  # None: undeclared
    created: int = 0
    supported_features: tuple[str, ...] = ()
    supported_sampling_parameters: tuple[str, ...] = SAMPLING_PARAMETERS
    capacity: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def _per_token(self) -> dict[str, Decimal]:
        return {k: Decimal(str(v)) / Decimal(1_000_000) for k, v in self.usd_per_m.items()}

    def per_token(self, kind: str) -> Decimal:
        """USD per token of `kind` (0 where the model does not price it); computed once per
        kind, as a request bills 10+ of them."""
        return self._per_token.get(kind, _ZERO)

    def priced(self, kind: str) -> bool:
        return kind in self.usd_per_m

    def cost_parts(
        self, prompt_tokens: int, completion_tokens: int, cached_tokens: int
    ) -> dict[str, Decimal]:
        """USD per billed part of one request. Cached prompt tokens are billed at the cache-read
        price. SGLang's radix cache stores every prompt token it had to compute (implicit
        caching), so those are the cache writes: billed at `input_cache_write` when the model
        prices it, else at the prompt price."""
        cached = max(0, min(cached_tokens, prompt_tokens))
        written = prompt_tokens - cached
        write_kind = "input_cache_write" if self.priced("input_cache_write") else "prompt"
        return {
            "prompt": self.per_token(write_kind) * written,
            "cached": self.per_token("input_cache_read") * cached,
            "completion": self.per_token("completion") * completion_tokens,
            "request": self.per_token("request"),
        }

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> float:
        """USD for one request: the sum of `cost_parts`."""
        return float(sum(self.cost_parts(prompt_tokens, completion_tokens, cached_tokens).values()))


def per_token_str(value: Decimal) -> str:
    # Plain decimal notation ("0.0000003"), never "3E-7", as aggregators parse these strings.
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


def model_from_dict(d: dict[str, Any], created_default: int) -> ModelPricing:
    missing = [
        k for k in ("id", "usd_per_m", "context_length", "max_completion_tokens") if k not in d
    ]
    if missing:
        raise ValueError(f"pricing entry {d.get('id', '?')!r} lacks {missing}")
    prices = {k: float(v) for k, v in d["usd_per_m"].items()}
    unknown = set(prices) - set(PRICE_FIELDS)
    if unknown or any(v < 0 for v in prices.values()):
        raise ValueError(f"pricing for {d['id']!r}: unknown fields {unknown} or negative price")
    quant = d.get("quantization")
    if quant is not None and quant not in QUANTIZATIONS:
        raise ValueError(f"quantization {quant!r} for {d['id']!r} not one of {QUANTIZATIONS}")
    known = {
        "id", "usd_per_m", "context_length", "max_completion_tokens", "upstream_model", "name",
        "description", "hugging_face_id", "quantization", "created", "supported_features",
        "supported_sampling_parameters", "capacity",
    }  # fmt: skip
    capacity = d.get("capacity") or {}
    if not isinstance(capacity, dict) or any(
        k not in CAPACITY_FIELDS or not _positive_int(v) for k, v in capacity.items()
    ):
        raise ValueError(
            f"capacity for {d['id']!r} is {capacity!r}; expected positive integers for any of "
            f"{sorted(CAPACITY_FIELDS)}"
        )
    return ModelPricing(
        id=d["id"],
        usd_per_m=prices,
        context_length=int(d["context_length"]),
        max_completion_tokens=int(d["max_completion_tokens"]),
        upstream_model=d.get("upstream_model", "") or d["id"],
        name=d.get("name", ""),
        description=d.get("description", ""),
        hugging_face_id=d.get("hugging_face_id", ""),
        quantization=quant,
        created=int(d.get("created", created_default)),
        supported_features=tuple(d.get("supported_features", ())),
        supported_sampling_parameters=tuple(
            d.get("supported_sampling_parameters", SAMPLING_PARAMETERS)
        ),
        capacity=dict(capacity),
        extra={k: v for k, v in d.items() if k not in known},
    )


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def load_pricing(path: str | Path) -> dict[str, ModelPricing]:
    """Model id -> pricing, from one JSON file or a directory of them."""
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    models: dict[str, ModelPricing] = {}
    for f in files:
        data = json.loads(f.read_text())
        entries = data["models"] if isinstance(data, dict) and "models" in data else [data]
        for entry in entries:
            m = model_from_dict(entry, created_default=int(f.stat().st_mtime or time.time()))
            if m.id in models:
                raise ValueError(f"model {m.id!r} priced twice (in {f})")
            models[m.id] = m
    if not models:
        raise ValueError(f"no models priced in {path}")
    return models


def floor_price_per_m(
    usd_per_gpu_hour: float, gpus: int, tokens_per_s: float, utilization: float = 1.0
) -> float:
    """Break-even USD per million tokens: $/GPU-h x GPUs / (tok/s x 3600 x utilization) x 1e6."""
    if tokens_per_s <= 0 or not 0 < utilization <= 1 or gpus <= 0:
        raise ValueError("need tokens_per_s > 0, gpus > 0 and 0 < utilization <= 1")
    return usd_per_gpu_hour * gpus / (tokens_per_s * 3600.0 * utilization) * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="floor price in USD per million tokens")
    p.add_argument("--usd-per-gpu-hour", type=float, required=True)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--tokens-per-s", type=float, required=True, help="measured, per node")
    p.add_argument("--utilization", type=float, default=1.0)
    a = p.parse_args(argv)
    price = floor_price_per_m(a.usd_per_gpu_hour, a.gpus, a.tokens_per_s, a.utilization)
    print(f"{price:.4f} USD per 1M tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
