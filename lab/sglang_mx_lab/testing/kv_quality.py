"""Served quality of a quantized KV cache against the same model served with a bf16 one: full
next-token distributions (the tiny models' whole vocabulary, as top log-probs) from two live
servers over the same contexts, as KL(bf16 || test) and top-1 agreement.

Two views per prompt, both over identical contexts on the two servers:
- prefill: the prompt followed by the bf16 server's greedy continuation, scored in one forward
  (every position reads keys just written through the KV cache, prefill's path);
- decode: each server's greedy steps while their tokens agree, the first disagreeing step
  included (its context is still shared), from the decode path's own distributions.

`python -m sglang_mx_lab.testing.kv_quality` starts the servers and prints the table.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from sglang_mx_lab.testing.served_distribution import greedy_generate, kl_and_top1, served_logprobs

# Short code prompts in the style of the corpus, and one held-out text that runs past GLM-5's
# tiny index_topk (128), so DSA selects keys in its last positions.
PROMPTS = (
    "def fibonacci(n):\n    ",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n",
)
NEW_TOKENS = 16


@dataclass(frozen=True)
class PromptQuality:
    prompt_tokens: int
    prefill_positions: int
    prefill_kl: float  # mean nats over the positions
    prefill_top1: float
    decode_steps: int  # compared steps: the common greedy prefix + the first divergence
    decode_kl: float
    decode_top1: float
    greedy_equal: bool  # the two servers' NEW_TOKENS greedy tokens are the same


def _rows(rows: list, vocab: int) -> torch.Tensor:
    out = torch.full((len(rows), vocab), float("-inf"), dtype=torch.float64)
    for i, row in enumerate(rows):
        for lp, token, _ in row:
            out[i, token] = lp
    return out


def decode_distributions(url: str, ids: list[int], n: int, vocab: int):
    """(greedy output ids, [n, V] log-probs of each decode step) from one /generate."""
    out = greedy_generate(
        url, n, input_ids=ids, return_logprob=True, top_logprobs_num=vocab, logprob_start_len=-1
    )
    meta = out["meta_info"]
    return list(out["output_ids"]), _rows(meta["output_top_logprobs"], vocab)


def prompt_quality(
    base_url: str, test_url: str, ids: list[int], vocab: int, n: int = NEW_TOKENS
) -> PromptQuality:
    base_ids, base_lp = decode_distributions(base_url, ids, n, vocab)
    test_ids, test_lp = decode_distributions(test_url, ids, n, vocab)
    pairs = zip(base_ids, test_ids, strict=False)
    same = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
    steps = min(len(base_ids), len(test_ids)) if same is None else same + 1
    d_kl, d_top1 = kl_and_top1(base_lp[:steps], test_lp[:steps])
    full = ids + base_ids
    p_kl, p_top1 = kl_and_top1(
        served_logprobs(base_url, full, vocab), served_logprobs(test_url, full, vocab)
    )
    return PromptQuality(
        len(ids), len(full) - 1, p_kl, p_top1, steps, d_kl, d_top1, base_ids == test_ids
    )


def kv_quality(
    base_url: str, test_url: str, prompt_ids: Sequence[list[int]], vocab: int
) -> list[PromptQuality]:
    return [prompt_quality(base_url, test_url, ids, vocab) for ids in prompt_ids]


def prompt_token_ids(model_dir: str) -> list[list[int]]:
    """PROMPTS and the held-out text (twice), in the model's tokenizer, no special tokens."""
    from transformers import AutoTokenizer

    from sglang_mx_lab.testing.served_distribution import held_out_prompt_ids

    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = [tok.encode(p, add_special_tokens=False) for p in PROMPTS]
    return [*ids, held_out_prompt_ids(model_dir)]


def summary(rows: Sequence[PromptQuality]) -> dict[str, float]:
    """Means over prompts (positions weighted equally within each view), worst prompt, and the
    share of prompts whose greedy tokens are equal."""
    pos = sum(r.prefill_positions for r in rows)
    steps = sum(r.decode_steps for r in rows)
    return {
        "prefill_kl_mean": sum(r.prefill_kl * r.prefill_positions for r in rows) / pos,
        "prefill_kl_max_prompt": max(r.prefill_kl for r in rows),
        "prefill_top1": sum(r.prefill_top1 * r.prefill_positions for r in rows) / pos,
        "decode_kl_mean": sum(r.decode_kl * r.decode_steps for r in rows) / steps,
        "decode_kl_max_prompt": max(r.decode_kl for r in rows),
        "decode_top1": sum(r.decode_top1 * r.decode_steps for r in rows) / steps,
        "greedy_equal": sum(r.greedy_equal for r in rows) / len(rows),
    }


def main(argv: list[str] | None = None) -> int:
    from sglang_mx.assets import bundled_model_path

    from sglang_mx_lab.testing.server import default_serve_args, start_servers

    p = argparse.ArgumentParser(
        prog="python -m sglang_mx_lab.testing.kv_quality", description=__doc__
    )
    p.add_argument("--model", choices=("glm5", "glm45"), default="glm5")
    p.add_argument("--kv-cache-dtype", default="fp8_e4m3")
    p.add_argument("--json", help="write the rows and the summary here")
    p.add_argument("extra", nargs="*", help="more SGLang arguments for the test server")
    args = p.parse_args(argv)
    if args.model == "glm5":
        model, base = default_serve_args()
    else:
        model, base = str(bundled_model_path("mxfp4")), ["--attention-backend", "mx_triton"]
    kv = ["--kv-cache-dtype", args.kv_cache_dtype, *args.extra]
    servers = start_servers([(model, base, None, None), (model, [*base, *kv], None, None)])
    try:
        rows = kv_quality(servers[0].base_url, servers[1].base_url, prompt_token_ids(model), 2048)
    finally:
        for s in servers:
            s.stop()
    for r in rows:
        print(asdict(r))
    result = summary(rows)
    print(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": [asdict(r) for r in rows], "summary": result}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
