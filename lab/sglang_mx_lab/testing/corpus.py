"""The bundled tiny models' corpus: the Python standard library's own .py sources (present on any
machine with Python), split into train and held-out files by a stable hash of the path."""

from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path

import torch

CORPUS_BYTES = 12_000_000  # what the bundled models were trained on (--corpus-mb 12)


def stdlib_files(max_bytes: int = CORPUS_BYTES) -> tuple[list[str], list[str]]:
    """Stdlib sources split ~95/5 by a hash of the relative path (stable across machines)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    train, held_out = [], []
    total = 0
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("site-packages/", "test/", "idlelib/", "lib2to3/tests/")):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        bucket = int(hashlib.sha256(rel.encode()).hexdigest(), 16) % 20
        (held_out if bucket == 0 else train).append(text)
        total += len(text)
        if total >= max_bytes:
            break
    return train, held_out


def encode_stream(tokenizer, texts: list[str], eos_id: int) -> torch.Tensor:
    """Token ids of the texts, each followed by eos, as one stream."""
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(eos_id)
    return torch.tensor(ids, dtype=torch.long)


def held_out_ids(tokenizer, n_tokens: int) -> torch.Tensor:
    """The first n_tokens of the held-out stream, tokenizing only as many files as needed."""
    _, held = stdlib_files()
    ids: list[int] = []
    for text in held:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(tokenizer.eos_token_id)
        if len(ids) >= n_tokens:
            return torch.tensor(ids[:n_tokens], dtype=torch.long)
    raise ValueError(f"held-out split has only {len(ids)} tokens, asked for {n_tokens}")
