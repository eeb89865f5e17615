"""The bundled tiny models, trained on the Python standard library (see docs/tiny-model.md):

- GLM-5 architecture (`GlmMoeDsaForCausalLM`: MLA + DSA indexer + MoE), kinds "glm5-bf16" and
  "glm5-quark" (alias "glm5-mxfp4"): the MXFP4 model in AMD Quark's file2file layout as
  amd/GLM-5.2-MXFP4 ships, with a trained NextN (MTP) layer kept bf16 and excluded; what
  `sglang-mx serve` serves by default.
- GLM-4.5 family (`Glm4MoeForCausalLM`, GQA attention), kinds "bf16" and "mxfp4".

Each kind is also reachable by its directory name (e.g. "tiny-glm-moe-mxfp4")."""

from __future__ import annotations

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
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"bundled model {kind!r} is missing at {path}; rebuild it with `make model`"
        )
    return str(path)
