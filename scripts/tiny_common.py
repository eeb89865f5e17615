"""What the tiny-model trainers and evaluators share (imported as a sibling: the scripts run as
`python scripts/NAME.py`): the size and MoE routing both bundled model families are built with,
the evaluators' command line, the GLM-5 evaluators' held-out setup and eager model, and the
stamped result record every evaluator writes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from sglang_mx.assets import bundled_model_path
from sglang_mx.measure.stamp import stamp
from sglang_mx_lab.testing.corpus import CORPUS_BYTES, encode_stream, stdlib_files


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


def glm5_eval_parser(
    doc: str, out: str, windows: int, mass_windows: int, mass_help: str
) -> argparse.ArgumentParser:
    """eval_parser plus what both GLM-5 evaluators take: --mass-windows (windows for the
    indexer's top-k attention mass) and --threads."""
    ap = eval_parser(doc, out, windows, "held-out windows per perplexity")
    ap.add_argument("--mass-windows", type=int, default=mass_windows, help=mass_help)
    ap.add_argument("--threads", type=int, default=1, help="1 on a shared, loaded box")
    ap.add_argument(
        "--model",
        help="bf16 weights directory to judge, e.g. a long-context trainer's --out "
        "(default: the bundled glm5-bf16)",
    )
    ap.add_argument(
        "--mxfp4",
        help="its MXFP4 checkpoint; 'none' skips the MXFP4 rows (default: the bundled "
        "glm5-mxfp4 with the bundled model, else none)",
    )
    return ap


def glm5_held_out(threads: int, corpus_bytes: int = CORPUS_BYTES, args=None):
    """(bf16 dir, MXFP4 dir or None, held-out token stream, index_topk) of the GLM-5 model that
    `args.model` / `args.mxfp4` name (default: the bundled pair), with torch limited to `threads`
    threads."""
    from transformers import AutoTokenizer

    torch.set_num_threads(threads)
    bf16 = getattr(args, "model", None) or bundled_model_path("glm5-bf16")
    mxfp4 = getattr(args, "mxfp4", None) or (
        None if getattr(args, "model", None) else bundled_model_path("glm5-mxfp4")
    )
    mxfp4 = None if mxfp4 == "none" else mxfp4
    tok = AutoTokenizer.from_pretrained(bf16)
    _, held = stdlib_files(corpus_bytes)
    ids = encode_stream(tok, held, tok.eos_token_id)
    topk = json.loads((Path(bf16) / "config.json").read_text())["index_topk"]
    return bf16, mxfp4, ids, topk


def load_eager(path: str):
    """The float32 transformers model at `path` with eager attention (the DSA evaluators read
    its attention weights), in eval mode."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    )
    return model.eval()


def write_record(out: Path, benchmark: str, config: dict, indent: int = 2, **fields) -> None:
    """An evaluator's result JSON at `out`: the benchmark's name, a stamp (hardware, versions,
    date) carrying `config`, then `fields` in order."""
    record = {"benchmark": benchmark, "stamp": stamp(config=config), **fields}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=indent) + "\n")
