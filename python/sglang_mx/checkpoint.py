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
            raise CheckpointError(
                f, f"cannot be read as safetensors ({e}); truncated or corrupt?"
            ) from e


def read_safetensors_header(path: Path) -> dict:
    """The JSON header of one .safetensors file, checked against the file's real size."""
    path = Path(path)
    size = path.stat().st_size
    if size < 8:
        raise CheckpointError(path, f"is {size} bytes, too small to be safetensors (truncated?)")
    with path.open("rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        if header_len <= 0 or 8 + header_len > size:
            raise CheckpointError(
                path, f"header claims {header_len} bytes but the file has {size} (truncated?)"
            )
        try:
            header = json.loads(f.read(header_len))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(path, f"has an unreadable header ({e})") from e
    header.pop("__metadata__", None)
    data_len = size - 8 - header_len
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if end > data_len:
            raise CheckpointError(
                path,
                f"tensor {name} needs bytes up to {end} but only {data_len} data bytes exist "
                "(truncated download or copy?)",
            )
    return header


def expected_shapes(config: dict) -> dict[str, list[int]]:
    """Shapes implied by a GLM-4.5-family config for the tensors that define the model's size."""
    hidden = config.get("hidden_size")
    vocab = config.get("vocab_size")
    if not hidden or not vocab:
        return {}
    shapes = {"model.embed_tokens.weight": [vocab, hidden], "lm_head.weight": [vocab, hidden]}
    inter = config.get("moe_intermediate_size")
    quantized = (config.get("quantization_config") or {}).get("quant_method") in ("mxfp4", "quark")
    if inter:
        for layer in range(config.get("num_hidden_layers", 0)):
            for e in range(config.get("n_routed_experts", 0) or 0):
                base = f"model.layers.{layer}.mlp.experts.{e}"
                for proj, (out_dim, in_dim) in (
                    ("gate_proj", (inter, hidden)),
                    ("up_proj", (inter, hidden)),
                    ("down_proj", (hidden, inter)),
                ):
                    shape = [out_dim, in_dim // 2] if quantized else [out_dim, in_dim]
                    shapes[f"{base}.{proj}.weight"] = shape
    return shapes


def validate_checkpoint(model_dir: Path) -> None:
    """Fail fast, naming the file and the problem, on a truncated or mismatched checkpoint."""
    model_dir = Path(model_dir)
    config = load_config(model_dir)
    expected = expected_shapes(config)
    for f in shard_files(model_dir):
        header = read_safetensors_header(f)
        for name, info in header.items():
            want = expected.get(name)
            if want is not None and list(info["shape"]) != want:
                raise CheckpointError(
                    f,
                    f"tensor {name} has shape {info['shape']} but {model_dir / 'config.json'} "
                    f"implies {want} (checkpoint and config do not match)",
                )
