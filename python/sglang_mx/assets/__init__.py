"""The bundled tiny model: a GLM-4.5-family MoE (Glm4MoeForCausalLM) trained on the Python
standard library, shipped in bf16 and as an MXFP4-experts checkpoint (see docs/tiny-model.md)."""

from __future__ import annotations

from pathlib import Path

ASSETS = Path(__file__).parent
KINDS = {"bf16": "tiny-glm-moe-bf16", "mxfp4": "tiny-glm-moe-mxfp4"}


def bundled_model_path(kind: str = "mxfp4") -> str:
    """Directory of the bundled checkpoint of the given kind ("bf16" or "mxfp4")."""
    if kind not in KINDS:
        raise ValueError(f"unknown bundled model kind {kind!r}; choose one of {sorted(KINDS)}")
    path = ASSETS / KINDS[kind]
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"bundled model {kind!r} is missing at {path}; rebuild it with `make model`"
        )
    return str(path)
