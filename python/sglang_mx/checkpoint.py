"""Read a Hugging Face safetensors checkpoint with errors that name the file and the problem."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch


class CheckpointError(ValueError):
    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


def load_config(model_dir: Path) -> dict:
    path = Path(model_dir) / "config.json"
    if not path.exists():
        raise CheckpointError(path, "missing; is this a Hugging Face model directory?")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(path, f"is not valid JSON ({e})") from e


def shard_files(model_dir: Path) -> list[Path]:
    model_dir = Path(model_dir)
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError) as e:
            raise CheckpointError(index, f"is not a valid safetensors index ({e})") from e
        files = [model_dir / n for n in names]
        for f in files:
            if not f.exists():
                raise CheckpointError(f, f"listed in {index.name} but missing")
        return files
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CheckpointError(model_dir, "has no *.safetensors files")
    return files


def open_shards(model_dir: Path) -> Iterator[tuple[str, torch.Tensor]]:
    from safetensors import SafetensorError, safe_open

    for f in shard_files(model_dir):
        try:
            with safe_open(str(f), framework="pt") as handle:
                for name in handle.keys():
                    yield name, handle.get_tensor(name)
        except SafetensorError as e:
            raise CheckpointError(f, f"cannot be read as safetensors ({e}); truncated or corrupt?") from e
