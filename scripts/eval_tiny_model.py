"""Held-out perplexity of the bundled bf16 and MXFP4 checkpoints (transformers, float32).

Uses the trainer's own held-out split of the Python standard library, so the number is
comparable with training.json. The MXFP4 model is the bf16 model with its experts replaced by
the reference dequantization of the MXFP4 checkpoint (what the served kernels compute).

    python scripts/eval_tiny_model.py --out benchmark/results/tiny_model_ppl.json
"""

from __future__ import annotations

import torch
from sglang_mx.assets import bundled_model_path
from sglang_mx_lab.testing.corpus import encode_stream, stdlib_files
from sglang_mx_lab.testing.hf_reference import load_hf, load_hf_mxfp4, perplexity
from tiny_common import eval_parser, write_record


def main() -> None:
    ap = eval_parser(
        __doc__, "benchmark/results/tiny_model_ppl.json", 64, "256-token held-out windows"
    )
    ap.add_argument("--corpus-mb", type=float, default=12.0, help="as in training")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    torch.set_num_threads(2)
    bf16, mxfp4 = bundled_model_path("bf16"), bundled_model_path("mxfp4")
    tok = AutoTokenizer.from_pretrained(bf16)
    _, held = stdlib_files(int(args.corpus_mb * 1e6))
    ids = encode_stream(tok, held, tok.eos_token_id).tolist()
    ppl_bf16 = perplexity(load_hf(bf16), ids, max_windows=args.windows)
    ppl_mx = perplexity(load_hf_mxfp4(bf16, mxfp4), ids, max_windows=args.windows)
    write_record(
        args.out,
        "tiny_model_ppl",
        {"windows": args.windows, "window_tokens": 256, "split": "stdlib held-out"},
        results={
            "bf16": ppl_bf16,
            "mxfp4_experts": ppl_mx,
            "relative_increase": ppl_mx / ppl_bf16 - 1,
        },
    )
    print(
        f"held-out perplexity: bf16 {ppl_bf16:.3f}, MXFP4 experts {ppl_mx:.3f} "
        f"(+{100 * (ppl_mx / ppl_bf16 - 1):.2f}%)"
    )


if __name__ == "__main__":
    main()
