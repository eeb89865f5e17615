"""The bundled tiny models, trained on the Python standard library (see docs/tiny-model.md):

- GLM-5 architecture (`GlmMoeDsaForCausalLM`: MLA + DSA indexer + MoE), kinds "glm5-bf16" and
  "glm5-quark" (alias "glm5-mxfp4"): the MXFP4 model in AMD Quark's file2file layout as
  amd/GLM-5.2-MXFP4 ships, with a trained NextN (MTP) layer kept bf16 and excluded; what
  `sglang-mx serve` serves by default.
- GLM-4.5 family (`Glm4MoeForCausalLM`, GQA attention), kinds "bf16" and "mxfp4".

Each kind is also reachable by its directory name (e.g. "tiny-glm-moe-mxfp4").

The GLM-4.5 MXFP4 model is not stored: it is `sglang-mx quantize` of the bf16 one (round to
nearest, byte-identical on every run), written beside it on first use (`make setup` does it). The
repository travels to the device machine under a 64 MiB cap, and its 7.6 MB were a copy."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

ASSETS = Path(__file__).parent
KINDS = {
    "bf16": "tiny-glm-moe-bf16",
    "mxfp4": "tiny-glm-moe-mxfp4",
    "glm5-bf16": "tiny-glm5-bf16",
    "glm5-quark": "tiny-glm5-quark",
    "glm5-mxfp4": "tiny-glm5-quark",  # the MXFP4 GLM-5: Quark's layout since it is the default
}


def bundled_model_path(kind: str = "mxfp4") -> str:
    """Directory of the bundled checkpoint of the given kind (a key of KINDS or its directory)."""
    name = KINDS.get(kind, kind)
    if name not in KINDS.values():
        raise ValueError(
            f"unknown bundled model {kind!r}; choose one of {sorted(KINDS)} "
            f"or {sorted(KINDS.values())}"
        )
    path = ASSETS / name
    if name in DERIVED and not (path / "config.json").exists():
        _derive(name)
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"bundled model {kind!r} is missing at {path}; rebuild it with `make model`"
        )
    return str(path)


# Models built from another bundled one: directory -> (source directory, what makes it).
DERIVED = {"tiny-glm-moe-mxfp4": ("tiny-glm-moe-bf16", "sglang-mx quantize (MXFP4 experts)")}


def _derive(name: str) -> None:
    """Write DERIVED[name] beside its source: built in a temporary folder and renamed into place,
    so concurrent first uses (test workers, servers) never see half a checkpoint."""
    from sglang_mx.quant.convert import quantize_checkpoint

    src = ASSETS / DERIVED[name][0]
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=ASSETS))
    except OSError as e:  # an installed wheel in a read-only site-packages
        raise FileNotFoundError(
            f"bundled model {name!r} is built from {src.name} on first use, and {ASSETS} is not "
            f"writable ({e.strerror}); run `sglang-mx quantize {src} <dir>` and serve <dir>"
        ) from e
    try:
        quantize_checkpoint(src, tmp)
        os.chmod(tmp, 0o755)
        try:
            tmp.rename(ASSETS / name)
        except OSError:  # another process renamed its copy first: the same bytes
            if not (ASSETS / name / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_derived() -> list[str]:
    """Build every derived model that is missing (make setup); the directories built."""
    missing = [n for n in DERIVED if not (ASSETS / n / "config.json").exists()]
    for name in missing:
        _derive(name)
    return missing
