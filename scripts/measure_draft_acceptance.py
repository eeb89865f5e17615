"""Served accept length of the default model's NextN draft on held-out prompts, for EAGLE chains
of 1, 3 and 5 steps (1/1/2, 3/1/4, 5/1/6: steps / topk / draft tokens), from SGLang's own
counters: decode tokens / verify steps, per request (`meta_info`), summed over the prompts.

Prompts: `--prompts` windows of `--prompt-tokens` tokens from the held-out split (stdlib files
the models never trained on), evenly spaced through it, sent as token ids; `--new` greedy tokens
each. Each setting is one `sglang-mx serve` (the default model, mx_dsa, float32, FP8 KV as the
recipes run it), started side by side. Writes docs/results/draft-acceptance-cpu.json.

    .venv/bin/python scripts/measure_draft_acceptance.py   # ~6 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from sglang_mx.measure.stamp import stamp  # noqa: E402
from sglang_mx.seam.cpu_binding import BIND_ENV  # noqa: E402
from sglang_mx_lab.testing.server import default_serve_args, start_servers  # noqa: E402

CHAINS = {"1/1/2": (1, 2), "3/1/4": (3, 4), "5/1/6": (5, 6)}
FIXED = ["--dtype", "float32", "--kv-cache-dtype", "fp8_e4m3"]


def spec_args(steps: int, draft_tokens: int) -> list[str]:
    return [
        "--speculative-algorithm", "EAGLE", "--speculative-num-steps", str(steps),
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(draft_tokens),
    ]  # fmt: skip


def held_out_prompts(model: str, n: int, length: int) -> list[list[int]]:
    from sglang_mx_lab.testing.corpus import held_out_ids
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    stride = 4 * length
    ids = held_out_ids(tok, n * stride).tolist()
    return [ids[i * stride : i * stride + length] for i in range(n)]


def served(url: str, prompts: list[list[int]], new: int) -> dict:
    decoded = verify = correct = proposed = 0
    outputs = []
    for p in prompts:
        body = {"input_ids": p, "sampling_params": {"max_new_tokens": new, "temperature": 0}}
        r = httpx.post(f"{url}/generate", json=body, timeout=900)
        r.raise_for_status()
        meta = r.json()["meta_info"]
        outputs.append(r.json()["output_ids"])
        decoded += meta["completion_tokens"] - 1  # the first token is the prefill's
        verify += meta.get("spec_verify_ct") or 0
        correct += meta.get("spec_num_correct_drafts") or 0
        proposed += meta.get("spec_num_proposed_drafts") or 0
    return {
        "accept_length": round(decoded / verify, 3) if verify else None,
        "decode_tokens": decoded,
        "verify_steps": verify,
        "kept_drafts": decoded - verify if verify else None,  # drafts that became output
        "correct_drafts": correct,  # SGLang's count: also drafts kept past max_new_tokens
        "proposed_drafts": proposed,
        "outputs": outputs,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(ROOT / "docs/results/draft-acceptance-cpu.json"))
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--prompt-tokens", type=int, default=48)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--model", default=None, help="default: what `sglang-mx serve` serves")
    ap.add_argument("--chains", nargs="+", default=list(CHAINS), choices=list(CHAINS))
    ap.add_argument(
        "--no-reference",
        action="store_true",
        help="skip the server without speculation (greedy equality not checked)",
    )
    args = ap.parse_args()

    model, base = default_serve_args()
    model = args.model or model
    env = {k: v for k, v in os.environ.items() if k != BIND_ENV}
    prompts = held_out_prompts(model, args.prompts, args.prompt_tokens)
    settings = {k: spec_args(*v) for k, v in CHAINS.items() if k in args.chains}
    if not args.no_reference:
        settings["none"] = []
    specs = [(model, [*base, *FIXED, *extra], env, None) for extra in settings.values()]
    handles = start_servers(specs, timeout=1200)
    try:  # one thread per server: their decodes overlap on the box's cores
        with ThreadPoolExecutor(len(handles)) as pool:
            futures = {n: pool.submit(served, h.base_url, prompts, args.new)
                       for n, h in zip(settings, handles, strict=True)}  # fmt: skip
            rows = {name: f.result() for name, f in futures.items()}
    finally:
        for h in handles:
            h.stop(wait=False)
    reference = rows.pop("none")["outputs"] if "none" in rows else None
    for name, row in rows.items():
        outputs = row.pop("outputs")
        row["greedy_equal_without_speculation"] = (
            None if reference is None else (outputs == reference)
        )
        print(f"EAGLE {name}: accept length {row['accept_length']}, drafts in output "
              f"{row['kept_drafts']} / {row['proposed_drafts']}, greedy equal "
              f"{row['greedy_equal_without_speculation']}")  # fmt: skip
    config = {
        "model": Path(model).name,
        "server_args": [*base, *FIXED],
        "prompts": f"{args.prompts} held-out windows of {args.prompt_tokens} tokens",
        "new_tokens": args.new,
        "chains": {k: spec_args(*CHAINS[k]) for k in args.chains},
    }
    record = {"stamp": stamp(config=config), "chains": rows}
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
