"""Per-model pricing and listing data: load the pricing file(s), compute a request's cost, and
derive a floor price from $/GPU-hour and a measured throughput.

A pricing file is JSON: one model object, or {"models": [...]}; a directory holds one file per
model. Prices are USD per million tokens (`usd_per_m`); /v1/models shows them per token."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

QUANTIZATIONS = ("int4", "int8", "fp4", "fp6", "fp8", "fp16", "bf16", "fp32")
SAMPLING_PARAMETERS = (
    "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "frequency_penalty",
    "presence_penalty", "stop", "seed", "max_tokens", "logit_bias",
)  # fmt: skip
PRICE_FIELDS = ("prompt", "completion", "input_cache_read", "input_cache_write", "request", "image")


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
    quantization: str = "fp4"
    created: int = 0
    supported_features: tuple[str, ...] = ()
    supported_sampling_parameters: tuple[str, ...] = SAMPLING_PARAMETERS
    extra: dict[str, Any] = field(default_factory=dict)

    def per_token(self, kind: str) -> Decimal:
        return Decimal(str(self.usd_per_m.get(kind, 0.0))) / Decimal(1_000_000)

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> float:
        """USD for one request; cached prompt tokens are billed at the cache-read price."""
        cached = max(0, min(cached_tokens, prompt_tokens))
        total = (
            self.per_token("prompt") * (prompt_tokens - cached)
            + self.per_token("input_cache_read") * cached
            + self.per_token("completion") * completion_tokens
            + self.per_token("request")
        )
        return float(total)

    def listing(self) -> dict[str, Any]:
        """The /v1/models entry, OpenRouter fields."""
        return {
            "id": self.id,
            "object": "model",
            "name": self.name or self.id,
            "created": self.created,
            "description": self.description,
            "context_length": self.context_length,
            "max_completion_tokens": self.max_completion_tokens,
            "hugging_face_id": self.hugging_face_id,
            "input_modalities": ["text"],
            "output_modalities": ["text"],
            "quantization": self.quantization,
            "pricing": {k: _per_token_str(self.per_token(k)) for k in PRICE_FIELDS},
            "supported_sampling_parameters": list(self.supported_sampling_parameters),
            "supported_features": list(self.supported_features),
            **self.extra,
        }


def _per_token_str(value: Decimal) -> str:
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
    quant = d.get("quantization", "fp4")
    if quant not in QUANTIZATIONS:
        raise ValueError(f"quantization {quant!r} for {d['id']!r} not one of {QUANTIZATIONS}")
    known = {
        "id", "usd_per_m", "context_length", "max_completion_tokens", "upstream_model", "name",
        "description", "hugging_face_id", "quantization", "created", "supported_features",
        "supported_sampling_parameters",
    }  # fmt: skip
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
        extra={k: v for k, v in d.items() if k not in known},
    )


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
