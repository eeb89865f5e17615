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
    """Unquantized [out, in] shapes a GLM-4.5/GLM-5-family config implies for the embeddings,
    lm_head and every MLP projection (dense MLPs, shared experts, routed experts)."""
    hidden = config.get("hidden_size")
    vocab = config.get("vocab_size")
    if not hidden or not vocab:
        return {}
    shapes = {"model.embed_tokens.weight": [vocab, hidden], "lm_head.weight": [vocab, hidden]}

    def mlp(base: str, inter: int) -> None:
        for proj, shape in (
            ("gate_proj", [inter, hidden]),
            ("up_proj", [inter, hidden]),
            ("down_proj", [hidden, inter]),
        ):
            shapes[f"{base}.{proj}.weight"] = shape

    moe_inter = config.get("moe_intermediate_size")
    dense_inter = config.get("intermediate_size")
    first_dense = int(config.get("first_k_dense_replace") or 0)
    for layer in range(config.get("num_hidden_layers", 0)):
        base = f"model.layers.{layer}.mlp"
        if layer < first_dense:
            if dense_inter:
                mlp(base, dense_inter)
            continue
        if not moe_inter:
            continue
        for e in range(config.get("n_routed_experts", 0) or 0):
            mlp(f"{base}.experts.{e}", moe_inter)
        if config.get("n_shared_experts"):
            mlp(f"{base}.shared_experts", moe_inter * int(config["n_shared_experts"]))
    return shapes


def _scheme(config: dict, config_path: Path):
    from sglang_mx.quant.scheme import MxSchemeError, parse_scheme

    raw = config.get("quantization_config")
    if not raw or str(raw.get("quant_method", "")).lower() not in ("mxfp4", "quark"):
        return None
    try:
        return parse_scheme(raw)
    except MxSchemeError as e:
        raise CheckpointError(config_path, f"quantization_config: {e}") from e


def _check_mxfp4_tensors(
    f: Path, header: dict, names: dict, scheme, config_path: Path, serves_linears: bool
) -> None:
    """Every packed MXFP4 weight we will serve has its scale, consistent shapes, and is a kind
    we serve. Without `serves_linears` (a GPU node: our method takes the routed experts only,
    SGLang serves every other layer its own way) only routed-expert tensors are checked."""
    from sglang_mx.quant.quark_layout import quantized_module, servable_linear

    for name, info in header.items():
        if not serves_linears and ".mlp.experts." not in name:
            continue
        if name.endswith(".weight_scale"):
            if not scheme.is_mxfp4(name[: -len(".weight_scale")]):
                continue  # another scheme's scale (an FP8 layer left to SGLang on a GPU node)
            weight = names.get(name[: -len("_scale")])
            if weight is None or weight["dtype"] != "U8":
                raise CheckpointError(
                    f, f"tensor {name} has no packed MXFP4 weight {name[: -len('_scale')]}"
                )
            continue
        if not name.endswith(".weight"):
            continue
        module = name[: -len(".weight")]
        packed = info["dtype"] == "U8"
        marked = quantized_module(name, scheme) is not None
        if _quark_quantizes_unservable(module, info, scheme):
            raise CheckpointError(
                config_path,
                f"quantization_config quantizes {module} (it is not in the exclude list), but "
                + servable_linear(module),
            )
        if packed and not marked:
            problem = servable_linear(module) if ".mlp.experts." not in module else ""
            raise CheckpointError(
                f,
                f"tensor {name} is packed MXFP4 (uint8) but cannot be served: "
                + (problem or f"{config_path} does not mark {module} as quantized"),
            )
        if marked and not packed:
            raise CheckpointError(
                f,
                f"tensor {name} is {info['dtype']}, but {config_path} quantizes {module} to "
                "MXFP4 (a uint8 weight and weight_scale are expected)",
            )
        if not packed:
            continue
        scale = names.get(name + "_scale")
        if scale is None:
            raise CheckpointError(
                f, f"tensor {name} is packed MXFP4 but its scale tensor {name}_scale is missing"
            )
        want = [info["shape"][0], info["shape"][1] * 2 // 32]
        if scale["dtype"] != "U8" or list(scale["shape"]) != want:
            raise CheckpointError(
                f,
                f"tensor {name}_scale is {scale['dtype']} {scale['shape']}; packed weight "
                f"{info['shape']} needs uint8 E8M0 scales of shape {want}",
            )


def _quark_quantizes_unservable(module: str, info: dict, scheme) -> bool:
    """A linear the Quark config leaves unexcluded (so SGLang would quantize it) that we cannot
    serve in MXFP4. Embeddings, lm_head and the router are not SGLang linears: never quantized."""
    from sglang_mx.quant.quark_layout import servable_linear

    if scheme.source != "quark" or len(info["shape"]) != 2:
        return False
    # The MTP layer's own embed_tokens / shared_head.head are skipped by SGLang's NextN loader.
    if module.endswith((".embed_tokens", ".mlp.gate", ".shared_head.head")) or module == "lm_head":
        return False
    return (
        not scheme.is_excluded(module) and scheme.is_mxfp4(module) and bool(servable_linear(module))
    )


def _refuse_other_schemes(f: Path, header: dict, scheme, config_path: Path) -> None:
    """On the CPU platform: a weight that `layer_quant_config` quantizes to anything but MXFP4
    (GLM-5.2-Quark-MXFP4-AttnFP8's FP8 attention) is refused, naming the tensor and the reason."""
    if scheme.source != "quark":
        return
    for name, info in header.items():
        if not name.endswith(".weight") or len(info["shape"]) != 2:
            continue
        module = name[: -len(".weight")]
        entry = scheme.layer_pattern(module)
        if entry is None or entry[1] or scheme.is_excluded(module):
            continue
        raise CheckpointError(
            f,
            f"tensor {name} is {info['dtype']}: {config_path.name} layer_quant_config "
            f"[{entry[0]!r}] quantizes {module} as {entry[2]}, not MXFP4. The sglang_mx CPU "
            "platform serves MXFP4 and unquantized layers only, and SGLang's own QuarkConfig "
            f"has no {entry[2]} scheme without a GPU ('No quark compatible scheme was found'); "
            "serve this checkpoint on a GPU node",
        )


def validate_checkpoint(model_dir: Path, serves_linears: bool = True) -> None:
    """Fail fast, naming the file and the problem, on a truncated or mismatched checkpoint.

    `serves_linears`: our platform serves every layer (the CPU box), so anything packed that we
    cannot serve is refused here; False on a GPU node, where we check only what our MoE method
    will load and leave the rest (FP8 attention, an FP4 MTP `eh_proj`, ...) to SGLang."""
    model_dir = Path(model_dir)
    config = load_config(model_dir)
    config_path = model_dir / "config.json"
    expected = expected_shapes(config)
    scheme = _scheme(config, config_path)
    headers = [(f, read_safetensors_header(f)) for f in shard_files(model_dir)]
    names = {name: info for _, header in headers for name, info in header.items()}
    for f, header in headers:
        if scheme is not None:
            if serves_linears:
                _refuse_other_schemes(f, header, scheme, config_path)
            _check_mxfp4_tensors(f, header, names, scheme, config_path, serves_linears)
        for name, info in header.items():
            want = expected.get(name)
            if want is not None and info["dtype"] == "U8":
                want = [want[0], want[1] // 2]
            if want is not None and list(info["shape"]) != want:
                raise CheckpointError(
                    f,
                    f"tensor {name} has shape {info['shape']} but {config_path} "
                    f"implies {want} (checkpoint and config do not match)",
                )


def _validate_local(path: str | None) -> None:
    """Check a local checkpoint directory; anything else (a hub id, no path) is SGLang's."""
    import os

    if path and os.path.isdir(path):
        from sglang_mx.platform_choice import serves_every_layer

        # Our platforms (mx_cpu, mx_cuda) serve every layer; SGLang's GPU platforms only the
        # routed experts through us.
        validate_checkpoint(path, serves_linears=serves_every_layer())


def _validate_before_load(loader, *args, **kwargs):
    """BEFORE hook on SGLang's model loader: check local checkpoints before reading weights (also
    a path given after launch, e.g. a weight update from disk)."""
    _validate_local(getattr(kwargs.get("model_config"), "model_path", None))
    return None


def _validate_at_launch(server_args, *args, **kwargs):
    """BEFORE hook on `ServerArgs.check_server_args`, which the launching process runs before it
    spawns a scheduler: a bad local checkpoint stops the server there, in seconds, instead of
    after the workers have started. Only for the formats SGLang's DefaultModelLoader reads as
    safetensors (not dummy weights, GGUF, bitsandbytes, ... which other loaders own)."""
    if str(getattr(server_args, "load_format", "auto")) in ("auto", "safetensors"):
        _validate_local(getattr(server_args, "model_path", None))
    return None


def register_load_check() -> None:
    """Validate a local checkpoint (truncated files, shapes against config.json), failing with
    the file's name: when the server is launched (before any worker starts) and again before
    SGLang's `DefaultModelLoader.load_model` reads it (an Engine or a worker given another path)."""
    from sglang_mx.sglang_version import hook

    hook("sglang.srt.server_args.ServerArgs.check_server_args", _validate_at_launch, "BEFORE")
    hook(
        "sglang.srt.model_loader.loader.DefaultModelLoader.load_model",
        _validate_before_load,
        "BEFORE",
    )
