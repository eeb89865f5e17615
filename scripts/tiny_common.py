"""What the tiny-model trainers and evaluators share (imported as a sibling: the scripts run as
`python scripts/NAME.py`): the size and MoE routing both bundled model families are built with,
and the evaluators' command line."""

from __future__ import annotations

import argparse
from pathlib import Path


def shared_config(vocab_size: int, eos_id: int, max_positions: int) -> dict:
    """Config fields the GLM-4.5-style and GLM-5-style tiny models have in common: 4 layers of
    width 256 (the first dense), 16 routed experts, top-4, one shared expert, no group limit."""
    return {
        "vocab_size": vocab_size,
        "hidden_size": 256,
        "intermediate_size": 512,  # the dense first layer
        "num_hidden_layers": 4,
        "first_k_dense_replace": 1,
        "num_attention_heads": 4,
        "n_routed_experts": 16,
        "num_experts_per_tok": 4,
        "n_shared_experts": 1,
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": True,
        "max_position_embeddings": max_positions,
        "eos_token_id": eos_id,
        "pad_token_id": eos_id,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }


def _parser(doc: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def train_parser(doc: str, minutes: float) -> argparse.ArgumentParser:
    """A trainer's parser with the flags both trainers take: --out, --minutes, --corpus-mb."""
    ap = _parser(doc)
    ap.add_argument("--out", type=Path, required=True, help="output checkpoint directory (bf16)")
    ap.add_argument("--minutes", type=float, default=minutes, help="wall-clock training budget")
    ap.add_argument("--corpus-mb", type=float, default=12.0, help="stdlib bytes to read")
    return ap


def eval_parser(doc: str, out: str, windows: int, windows_help: str) -> argparse.ArgumentParser:
    """An evaluator's parser with the flags every evaluator takes: --out (the result JSON) and
    --windows (how many held-out windows)."""
    ap = _parser(doc)
    ap.add_argument("--out", type=Path, default=Path(out))
    ap.add_argument("--windows", type=int, default=windows, help=windows_help)
    return ap
