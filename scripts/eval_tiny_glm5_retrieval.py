"""Retrieval probe of the long-context tiny GLM-5 (issue 59): can the model, attending through
its indexer's top-k as served, recall a value planted 1k-30k tokens back?

Each held-out sequence (long_data.LongData, split "held": stdlib files no training sequence
uses) plants `NAME = 'value'` (6 random hex digits) `gap` tokens before its end and ends with
`assert NAME == '`; the model, teacher-forced, must predict every token of the value (greedy
argmax at each). A sample is recalled when all of them are right; the record gives the share
recalled per gap, with the per-token accuracy and the value tokens' NLL beside it. Chance is far
below: the value is 24 random bits. `plant_selected` is the mean share of the planted line's
tokens in the top-k of a value query, over those queries and the indexers (1 where the sequence
is within top-k); `--length` fixes the sequence length (else each gap + 256), so a miss is put
on the distance or on the length; `--dense` adds the recall through every causal key, so a miss
is put on the indexer or on the copy.

    python scripts/eval_tiny_glm5_retrieval.py --model build/long-sparse --gaps 1024,4096
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from long_attention import DENSE, LongSettings, forward
from long_data import LongData
from tiny_common import eval_parser, load_eager, write_record


def plant_selected(selections: list, s, chunk: int) -> float:
    """Mean share of the planted line's tokens in the top-k, over (value query, indexer) pairs:
    what of the line the main attention can see when it copies the value."""
    at = s.ids.numel() - s.gap
    plant = torch.arange(at, at + s.plant_len)
    queries = s.answer.nonzero().flatten().tolist()
    shares = [1.0 if (sel := per_chunk[q // chunk]) is None
              else float(torch.isin(plant, sel[q % chunk]).float().mean())
              for per_chunk in selections for q in queries]  # fmt: skip
    return sum(shares) / len(shares) if shares else float("nan")


@torch.no_grad()
def probe(model, data: LongData, gap: int, samples: int, topk: int, length: int = 0,
          first: int = 0) -> dict:  # fmt: skip
    """Recall through `topk` (DENSE: every causal key), with the planted line's selection, in
    sequences of `length` tokens (0: the gap + 256, the shortest that holds it): held-out
    sequences `first` .. `first + samples - 1` (a second run past the first's adds fresh ones)."""
    length = length or gap + 256
    if length < gap + 256:
        raise ValueError(f"a {length}-token sequence cannot hold a line {gap} tokens back")
    st = LongSettings(topk=topk, checkpoint_chunks=False)
    recalled, right, tokens, nll, selected = 0, 0, 0, 0.0, []
    for i in range(first, first + samples):
        s = data.sample(i, length, gap=gap)
        sels: list = []
        logits, _ = forward(model, s.ids[:-1], st, selections=sels)
        selected.append(plant_selected(sels, s, st.chunk))
        logp = torch.log_softmax(logits[s.answer].double(), -1)
        target = s.ids[1:][s.answer]
        hit = logp.argmax(-1) == target
        recalled += bool(hit.all())
        right, tokens = right + int(hit.sum()), tokens + target.numel()
        nll += float(-logp.gather(1, target[:, None]).sum())
    return {"gap": gap, "length": length, "attention": "dense" if topk == DENSE else f"top-{topk}",
            "samples": samples, "first": first, "recalled": recalled / samples,
            "token_accuracy": right / tokens, "value_nll": nll / tokens,
            "plant_selected": sum(selected) / samples}  # fmt: skip


def main() -> None:
    ap = eval_parser(__doc__, "docs/results/tiny_glm5_retrieval.json", 10, "sequences per gap")
    ap.add_argument("--model", required=True, help="bf16 weights directory")
    ap.add_argument("--gaps", default="1024,4096,16384,30720", help="tokens back, comma-separated")
    ap.add_argument("--length", type=int, default=0,
                    help="tokens a sequence (0: each gap + 256)")  # fmt: skip
    ap.add_argument("--first", type=int, default=0,
                    help="first held-out sequence (past a run's: fresh ones)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--dense",
        action="store_true",
        help="also recall through dense attention: is the indexer or the copy short?",
    )
    args = ap.parse_args()
    from transformers import AutoTokenizer

    torch.set_num_threads(args.threads)
    topk = json.loads((Path(args.model) / "config.json").read_text())["index_topk"]
    data = LongData(AutoTokenizer.from_pretrained(args.model), "held", seed=1)
    model = load_eager(args.model)
    rows, t0 = [], time.time()
    for gap in (int(g) for g in args.gaps.split(",")):
        for k in (topk, DENSE) if args.dense else (topk,):
            rows.append(probe(model, data, gap, args.windows, k, args.length, args.first))
            r = rows[-1]
            print(f"gap {gap} in {r['length']} {r['attention']}: recalled {r['recalled']:.2f} "
                  f"(tokens {r['token_accuracy']:.2f}, NLL {r['value_nll']:.3f}, "
                  f"planted line selected {r['plant_selected']:.2f}) "
                  f"({time.time() - t0:.0f} s)", flush=True)  # fmt: skip
    config = {"model": args.model, "index_topk": topk, "sequences_per_gap": args.windows,
              "first_sequence": args.first,
              "split": "long_data held-out, seed 1", "compute": "long_attention.forward, float32",
              "threads": args.threads}  # fmt: skip
    write_record(args.out, "tiny_glm5_retrieval", config, indent=1, gaps=rows,
                 wall_s=round(time.time() - t0, 1))  # fmt: skip


if __name__ == "__main__":
    main()
