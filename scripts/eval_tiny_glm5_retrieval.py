"""Retrieval probe of the long-context tiny GLM-5 (issue 59): can the model, attending through
its indexer's top-k as served, recall a value planted 1k-30k tokens back?

Each held-out sequence (long_data.LongData, split "held": stdlib files no training sequence
uses) plants `NAME = 'value'` (6 random hex digits) `gap` tokens before its end and ends with
`assert NAME == '`; the model, teacher-forced, must predict every token of the value (greedy
argmax at each). A sample is recalled when all of them are right; the record gives the share
recalled per gap, with the per-token accuracy and the value tokens' NLL beside it. Chance is far
below: the value is 24 random bits.

    python scripts/eval_tiny_glm5_retrieval.py --model build/long-sparse --gaps 1024,4096
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from long_attention import LongSettings, forward
from long_data import LongData
from tiny_common import eval_parser, load_eager, write_record


@torch.no_grad()
def probe(model, data: LongData, gap: int, samples: int, topk: int) -> dict:
    st = LongSettings(topk=topk, checkpoint_chunks=False)
    recalled, right, tokens, nll = 0, 0, 0, 0.0
    for i in range(samples):
        s = data.sample(i, gap + 256, gap=gap)
        logits, _ = forward(model, s.ids[:-1], st)
        logp = torch.log_softmax(logits[s.answer].double(), -1)
        target = s.ids[1:][s.answer]
        hit = logp.argmax(-1) == target
        recalled += bool(hit.all())
        right, tokens = right + int(hit.sum()), tokens + target.numel()
        nll += float(-logp.gather(1, target[:, None]).sum())
    return {"gap": gap, "samples": samples, "recalled": recalled / samples,
            "token_accuracy": right / tokens, "value_nll": nll / tokens}  # fmt: skip


def main() -> None:
    ap = eval_parser(__doc__, "docs/results/tiny_glm5_retrieval.json", 10, "sequences per gap")
    ap.add_argument("--model", required=True, help="bf16 weights directory")
    ap.add_argument("--gaps", default="1024,4096,16384,30720", help="tokens back, comma-separated")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    torch.set_num_threads(args.threads)
    topk = json.loads((Path(args.model) / "config.json").read_text())["index_topk"]
    data = LongData(AutoTokenizer.from_pretrained(args.model), "held", seed=1)
    model = load_eager(args.model)
    rows, t0 = [], time.time()
    for gap in (int(g) for g in args.gaps.split(",")):
        rows.append(probe(model, data, gap, args.windows, topk))
        r = rows[-1]
        print(f"gap {gap}: recalled {r['recalled']:.2f} (tokens {r['token_accuracy']:.2f}, "
              f"NLL {r['value_nll']:.3f}) ({time.time() - t0:.0f} s)", flush=True)  # fmt: skip
    config = {"model": args.model, "index_topk": topk, "sequences_per_gap": args.windows,
              "split": "long_data held-out, seed 1", "compute": "long_attention.forward, float32",
              "threads": args.threads}  # fmt: skip
    write_record(args.out, "tiny_glm5_retrieval", config, indent=1, gaps=rows,
                 wall_s=round(time.time() - t0, 1))  # fmt: skip


if __name__ == "__main__":
    main()
