"""Claim files the verify tests write: a small concurrency workload on one model, any field
replaced by keyword (whole sections)."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_claim(directory: Path, value: float, **over) -> str:
    """A claim of `value` output tok/s per node in `directory`; returns its path."""
    raw = {
        "schema": 1,
        "id": "fake-claim",
        "model": {"name": "fake-model"},
        "hardware": {"name": "MI355X", "gpus": 8},
        "engine": {"name": "fake"},
        "workload": {"input_len": 64, "output_len": 8, "hit_rate": 0.5, "prefix_groups": 2,
                     "num_requests": 8, "arrival": "concurrency", "concurrency": 4},
        "slo": {"ttft_s": 5.0},
        "price": {"usd_per_gpu_hour": 1.48, "source": "test", "date": "2026-12-01"},
        "claimed": {"figure": "output_tok_s", "value": value, "per": "node", "source": "test"},
    }  # fmt: skip
    raw.update(over)
    path = directory / f"claim-{value:g}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)
