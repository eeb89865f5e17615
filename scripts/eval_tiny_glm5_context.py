"""Quality of the bundled tiny GLM-5-architecture model across its context: held-out perplexity
by position band (bf16 and MXFP4, indexer active as served; bf16 also dense), the dense attention
mass the indexer's top-k keeps by position band, and the context where quality holds: the end of
the longest run of bands, from the first, whose perplexity stays within FACTOR x the first band's.

transformers' GlmMoeDsaForCausalLM in float32 on windows of the trainer's held-out split (the
stdlib stream, files joined by eos) of --length tokens each; the MXFP4 model is the bf16 model
with its experts replaced by the reference dequantization of the MXFP4 checkpoint.

    python scripts/eval_tiny_glm5_context.py --out docs/results/tiny_glm5_ppl_by_position.json

The bundled configs' max_position_embeddings (what SGLang serves as context_length) are held to
this record's `quality_context` by test/sglang_mx/assets/test_tiny_glm5_context.py.
"""

from __future__ import annotations

import math
import time

import torch
from sglang_mx_lab.testing import dsa_reference as dsa
from sglang_mx_lab.testing.hf_reference import load_hf_mxfp4, quality_context
from tiny_common import glm5_eval_parser, glm5_held_out, load_eager, write_record

# The 0-512 band is the trained range (sequences of 128/256/512 tokens); a model that keeps its
# quality has later bands at or below it (more context), so 1.25x is already a clear loss.
FACTOR = 1.25
BAND_EDGES = (0, 512, 1024, 2048, 4096, 8192, 16384, 32768)  # decision bands
ISSUE_BANDS = ((0, 512), (512, 2048), (2048, 8192))  # the bands issue 26 names, reported too


@torch.no_grad()
def position_nll(model, windows: list[torch.Tensor]) -> torch.Tensor:
    """Mean over windows of -log p(token[i+1] | token[:i+1]) at every position i, float64."""
    total = None
    for w in windows:
        logits = model(input_ids=w[:-1].unsqueeze(0), use_cache=False).logits[0].double()
        nll = -torch.log_softmax(logits, -1).gather(1, w[1:].unsqueeze(1)).squeeze(1)
        total = nll if total is None else total + nll
    return total / len(windows)


def eager_nll(model, windows: list[torch.Tensor], _k: int) -> torch.Tensor:
    """position_nll with the top-k the model is set to (dsa.set_index_topk)."""
    return position_nll(model, windows)


def band_ppl(nll: torch.Tensor, bands) -> list[dict]:
    return [
        {"band": [a, b], "perplexity": math.exp(float(nll[a:b].mean()))}
        for a, b in bands
        if b <= nll.numel()
    ]


@torch.no_grad()
def mass_by_band(model, window: torch.Tensor, k: int, bands) -> dict[str, list[dict]]:
    """Per layer and position band: dense attention mass on the indexer's top-k keys, on the
    attention's own top-k keys (the most any k keys hold) and on k random keys (k / keys)."""
    s = window.numel()
    dsa.set_index_topk(model, dsa.DENSE)
    try:
        with dsa.capture(model) as cap:
            model(input_ids=window.unsqueeze(0), use_cache=False)
    finally:
        dsa.set_index_topk(model, k)
    out: dict[str, list[dict]] = {}
    for owner, members in dsa.indexer_groups(model).items():
        hidden, q_resid, cos, sin = cap.indexer_inputs[owner]
        scores = dsa.index_scores(
            model.model.layers[owner].self_attn.indexer, hidden, q_resid, cos, sin
        )[0]
        scores = scores.masked_fill(~dsa.causal_mask(s), float("-inf"))
        picked = scores.topk(min(k, s), dim=-1).indices
        del scores
        for i in members:
            att = cap.attention[i][0].masked_fill(~dsa.causal_mask(s), 0.0)
            got = att.gather(-1, picked).sum(-1)
            best = att.topk(min(k, s), dim=-1).values.sum(-1)
            rand = k / torch.arange(1, s + 1, dtype=torch.float64)
            rows = []
            for a, b in bands:
                a = max(a, k)  # rows with more causal keys than k
                if b > s or a >= b:
                    continue
                g, bb, r = (float(x[a:b].double().mean()) for x in (got, best, rand))
                rows.append(
                    {
                        "band": [a, b],
                        "indexer": g,
                        "best": bb,
                        "random": r,
                        "captured": (g - r) / (bb - r),
                    }  # fmt: skip
                )
            out[str(i)] = rows
    return out


def main() -> None:
    ap = glm5_eval_parser(__doc__, "docs/results/tiny_glm5_ppl_by_position.json", 4, 1,
                          "windows for top-k mass")  # fmt: skip
    ap.add_argument("--length", type=int, default=8192, help="tokens per window")
    ap.add_argument("--factor", type=float, default=FACTOR)
    ap.add_argument(
        "--chunked",
        action="store_true",
        help="measure through long_eval.py (query chunks, no L x L matrix: needed past ~8k "
        "tokens here) instead of transformers' eager forward",
    )
    args = ap.parse_args()
    if args.chunked:
        import long_eval

        nll_of, mass_of = long_eval.position_nll, long_eval.mass_by_band
    else:
        nll_of, mass_of = eager_nll, mass_by_band
    bf16, mxfp4, ids, topk = glm5_held_out(args.threads, args=args)
    n = args.length + 1
    if len(ids) < args.windows * n:
        raise SystemExit(f"held-out split has {len(ids)} tokens, need {args.windows * n}")
    windows = [ids[i * n : (i + 1) * n] for i in range(args.windows)]
    edges = [e for e in BAND_EDGES if e <= args.length]
    bands = list(zip(edges[:-1], edges[1:], strict=True))

    ppl: dict[str, dict] = {}
    t0 = time.time()
    runs = [
        ("bf16", "sparse", lambda: load_eager(bf16), topk),
        ("bf16", "dense", lambda: load_eager(bf16), dsa.DENSE),
    ]
    if mxfp4:
        runs.append(("mxfp4_experts", "sparse", lambda: load_hf_mxfp4(bf16, mxfp4), topk))
    for name, mode, load, k in runs:
        model = load()
        dsa.set_index_topk(model, k)
        nll = nll_of(model, windows, k)
        rows = band_ppl(nll, bands)
        ppl.setdefault(name, {})[mode] = {
            "bands": rows,
            "issue_bands": band_ppl(nll, ISSUE_BANDS),
            "quality_context": quality_context(rows, args.factor),
        }
        cells = ", ".join(f"{r['band'][0]}-{r['band'][1]} {r['perplexity']:.2f}" for r in rows)
        print(f"{name} {mode}: {cells} ({time.time() - t0:.0f} s)", flush=True)

    model = load_eager(bf16)
    mass: dict[str, list[dict]] = {}
    for w in windows[: args.mass_windows]:
        for layer, rows in mass_of(model, w[:-1], topk, bands).items():
            mass.setdefault(layer, []).append(rows)
    mass_avg = {
        layer: [
            {
                "band": per[0][j]["band"],
                **{
                    f: sum(p[j][f] for p in per) / len(per)
                    for f in ("indexer", "best", "random", "captured", "overlap")
                    if f in per[0][j]  # overlap: the chunked path's
                },
            }
            for j in range(len(per[0]))
        ]
        for layer, per in mass.items()
    }
    for layer, rows in mass_avg.items():
        cells = ", ".join(
            f"{r['band'][0]}-{r['band'][1]} {r['indexer']:.3f}"
            + (f" (overlap {r['overlap']:.2f})" if "overlap" in r else "")
            for r in rows
        )
        print(f"layer {layer} top-{topk} dense mass: {cells}", flush=True)

    context = min(ppl[name]["sparse"]["quality_context"] for name in ppl)
    config = {
        "model": "tiny-glm5 (GlmMoeDsaForCausalLM)",
        "weights": {"bf16": str(bf16), "mxfp4": mxfp4 and str(mxfp4)},
        "windows": args.windows,
        "window_tokens": args.length,
        "mass_windows": args.mass_windows,
        "index_topk": topk,
        "split": "stdlib held-out, files joined by eos",
        "compute": "float32, "
        + (
            "scripts/long_eval.py (query chunks of 512)"
            if args.chunked
            else "transformers, eager attention"
        ),
        "threads": args.threads,
    }
    write_record(
        args.out,
        "tiny_glm5_ppl_by_position",
        config,
        indent=1,
        factor=args.factor,
        rule="quality_context = end of the longest run of bands from the first whose "
        "perplexity (indexer active, as served) <= factor x the first band's; the served "
        "context is the smaller of bf16's and MXFP4's (bf16's alone without an MXFP4 checkpoint)",
        quality_context=context,
        perplexity=ppl,
        topk_mass_by_band=mass_avg,
        wall_s=round(time.time() - t0, 1),
    )
    print(f"quality context {context} tokens (factor {args.factor}); wrote {args.out}")


if __name__ == "__main__":
    main()
