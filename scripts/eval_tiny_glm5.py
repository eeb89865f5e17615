"""Held-out perplexity of the bundled tiny GLM-5-architecture model, bf16 and MXFP4, with the DSA
indexer active (sparse attention, index_topk keys per query) and with dense attention, plus how
much of the dense attention's mass the indexer's top-k keys hold.

transformers' GlmMoeDsaForCausalLM in float32 on the trainer's held-out split of the Python
standard library; the MXFP4 model is the bf16 model with its experts replaced by the reference
dequantization of the MXFP4 checkpoint (what the served kernels compute).

    python scripts/eval_tiny_glm5.py --out docs/results/tiny_glm5_ppl.json
"""

from __future__ import annotations

from sglang_mx_lab.testing import dsa_reference as dsa
from sglang_mx_lab.testing.hf_reference import load_hf_mxfp4, perplexity
from tiny_common import glm5_eval_parser, glm5_held_out, load_eager, write_record


def main() -> None:
    ap = glm5_eval_parser(__doc__, "docs/results/tiny_glm5_ppl.json", 32, 4,
                          "512-token windows for top-k mass")  # fmt: skip
    ap.add_argument("--window", type=int, default=256, help="tokens per window (> index_topk)")
    ap.add_argument("--corpus-mb", type=float, default=12.0, help="as in training")
    args = ap.parse_args()
    bf16, mxfp4, ids, topk = glm5_held_out(args.threads, int(args.corpus_mb * 1e6), args)

    results: dict[str, dict] = {}
    models = {"bf16": lambda: load_eager(bf16)}
    if mxfp4:
        models["mxfp4_experts"] = lambda: load_hf_mxfp4(bf16, mxfp4)
    for name, load in models.items():
        model = load()
        row = {}
        for mode, k in (("sparse", topk), ("dense", dsa.DENSE)):
            dsa.set_index_topk(model, k)
            row[mode] = perplexity(
                model, ids.tolist(), window=args.window, max_windows=args.windows
            )
        dsa.set_index_topk(model, topk)
        results[name] = row
        print(f"{name}: held-out perplexity sparse {row['sparse']:.3f}, dense {row['dense']:.3f}")

    model = load_eager(bf16)
    per_layer: dict[int, list[dsa.TopkMass]] = {}
    for w in range(args.mass_windows):
        window = ids[w * 512 : (w + 1) * 512].unsqueeze(0)
        for layer, m in dsa.layer_topk_mass(model, window, topk).items():
            per_layer.setdefault(layer, []).append(m)
    mass = {}
    for layer, ms in sorted(per_layer.items()):
        row = {
            f: sum(getattr(m, f) for m in ms) / len(ms)
            for f in ("indexer", "best", "random", "captured")
        }
        mass[str(layer)] = row
        print(
            f"layer {layer}: dense attention mass on the indexer's top-{topk} keys "
            f"{row['indexer']:.3f} (best {row['best']:.3f}, random {row['random']:.3f}; "
            f"{row['captured']:.2f} of the attainable gain)"
        )
    config = {
        "model": "tiny-glm5 (GlmMoeDsaForCausalLM)",
        "weights": {"bf16": str(bf16), "mxfp4": mxfp4 and str(mxfp4)},
        "windows": args.windows,
        "window_tokens": args.window,
        "index_topk": topk,
        "mass_windows_512": args.mass_windows,
        "split": "stdlib held-out",
        "compute": "transformers, float32",
    }
    write_record(
        args.out,
        "tiny_glm5_ppl",
        config,
        results={
            "perplexity": results,
            "mxfp4_relative_increase_sparse": (
                results["mxfp4_experts"]["sparse"] / results["bf16"]["sparse"] - 1
                if mxfp4
                else None
            ),
            "topk_mass_per_layer": mass,
        },
    )


if __name__ == "__main__":
    main()
