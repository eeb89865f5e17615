"""Build the shipped default model, `tiny-glm5-quark`: the bundled tiny GLM-5 (bf16) plus its
trained NextN (MTP) layer (`scripts/train_tiny_glm5_mtp.py`), written in AMD Quark's file2file
layout as amd/GLM-5.2-MXFP4 ships (https://huggingface.co/amd/GLM-5.2-MXFP4, Quark 0.11):

- one tensor per expert; routed and shared experts MXFP4 (uint8 `weight`, E8M0 `weight_scale`);
- an exact-name `exclude` list, the card's patterns expanded over the model's linears:
  attention (MLA + DSA indexer), routers, lm_head, the dense MLP and the whole MTP layer;
- weights only (W4A16, Quark's weight-only MXFP4): GLM-5.2-MXFP4 also quantizes activations,
  which `sglang-mx quantize --format quark --act-quant mxfp4` covers; the shipped model keeps the
  served quality of the earlier default (docs/quark-and-dispatch.md).

    python scripts/build_tiny_glm5_quark.py --mtp /tmp/mtp \
        --out python/sglang_mx/assets/tiny-glm5-quark
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

# amd/GLM-5.2-MXFP4's --exclude_layers, with its MTP layer (78) as ours (num_hidden_layers).
GLM52_EXCLUDE = (
    "*self_attn*", "*mlp.gate", "*lm_head", "*mlp.gate_proj", "*mlp.up_proj", "*mlp.down_proj",
    "*layers.{mtp}.*",
)  # fmt: skip


def quantization_config(config: dict, modules: list[str]) -> dict:
    from sglang_mx.quant import quark_layout
    from sglang_mx_lab.testing.quark_file2file import expand_excludes

    qc = quark_layout.quantization_config(config, act_quant="none", layout="full")
    patterns = [p.format(mtp=config["num_hidden_layers"]) for p in GLM52_EXCLUDE]
    qc["exclude"] = expand_excludes(patterns, modules + ["lm_head"])
    return qc


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mtp", type=Path, required=True, help="train_tiny_glm5_mtp.py --out")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--base", type=Path, default=None, help="default: bundled tiny-glm5-bf16")
    args = ap.parse_args()

    from safetensors.torch import load_file, save_file
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.quark_file2file import linear_modules, write_checkpoint

    base = args.base or Path(bundled_model_path("glm5-bf16"))
    tensors = {
        **load_file(str(base / "model.safetensors")),
        **load_file(str(args.mtp / "mtp.safetensors")),
    }
    config = json.loads((base / "config.json").read_text())
    config["num_nextn_predict_layers"] = 1
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp)
        for f in base.iterdir():
            if f.is_file() and f.name not in ("config.json", "model.safetensors"):
                shutil.copy2(f, staged / f.name)
        shutil.copy2(args.mtp / "mtp-training.json", staged / "mtp-training.json")
        save_file(tensors, str(staged / "model.safetensors"), metadata={"format": "pt"})
        (staged / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        if args.out.exists():
            shutil.rmtree(args.out)
        write_checkpoint(staged, args.out, quantization_config(config, linear_modules(tensors)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
