"""Distill the tiny GLM-5's NextN (MTP) layer on the main model's own greedy continuations, as
EAGLE-style drafts are trained, so that chained drafts (EAGLE 5/1/6) are accepted.

`scripts/train_tiny_glm5_mtp.py` trains the layer on corpus text, one step ahead (x[t+2]); served
as a 5-step chain it was accepted 13 times in 255 (accept length 1.18). Two things differ when
SGLang drafts: the text is the main model's own greedy output, not the corpus, and steps 2-5 see
the draft's own hidden state and its own proposed token, not the main model's. So here:

1. **Data.** Windows of `--prompt` tokens from the train split, each continued greedily by the
   frozen main model (transformers, float32) for `--new` tokens, stopping at eos as the server
   does. The main model's final hidden state (after its final norm, what SGLang's EAGLE worker
   hands the draft) and its greedy next token are kept for every position.
2. **Unrolled chain.** Step 1 at position t sees (embed(x[t+1]), H[t]) and is trained on the main
   model's greedy token after x[..t+1]; step k > 1 sees (embed(x[t+k]), its own step k-1 output at
   t), trained on the greedy token after x[..t+k]. On greedy text x[t+k] is what an accepted
   draft proposed, so the chain trains on what it meets when served. The loss counts positions
   whose chain runs inside the continuation (before its eos).
3. **Held-out check.** Prompts from the held-out split, continued the same way; the draft runs
   its own chain (its own argmax fed back) and the expected accept length is 1 + the mean number
   of leading drafts equal to the main model's greedy tokens, for chains of 1, 3 and 5.

The simulated chain attends over keys of the same step (every position's step-k input), where
SGLang's draft attends over the committed positions' step-1 keys: an approximation, which is why
the served accept length (SGLang's own counters) is what docs/tiny-model.md reports.

    nice -n 10 python scripts/distill_tiny_glm5_mtp.py --out build/mtp --minutes 30
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from train_tiny_glm5_mtp import NextN, frozen_main_and_corpus, save_layer, train_for


@torch.no_grad()
def continuations(main, ids: torch.Tensor, n: int, prompt: int, new: int, seed: int, batch: int):
    """n windows of `prompt` tokens from `ids`, each greedily continued by `new` tokens.

    Returns tokens [n, prompt + new], the main model's final hidden state [n, L, H] and greedy next
    token [n, L] at each position, and a mask [n, L] of the positions up to the first whose greedy
    next token is eos (the server stops there)."""
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(ids) - prompt - 1, (n,), generator=gen).tolist()
    eos = main.config.eos_token_id
    toks, hidden, greedy, live = [], [], [], []
    for i in range(0, n, batch):
        x = torch.stack([ids[s : s + prompt] for s in starts[i : i + batch]])
        out = main.generate(
            x, attention_mask=torch.ones_like(x), max_new_tokens=new, min_new_tokens=new,
            do_sample=False, pad_token_id=eos,
        )  # fmt: skip
        # min_new_tokens keeps every row the same length; rows are cut where greedy emits eos
        h = main.model(input_ids=out, use_cache=False).last_hidden_state
        g = main.lm_head(h).argmax(-1)
        # where the unconstrained greedy token is eos, the server would have stopped: the token
        # after it was forced, so positions past it are not served text
        stops = g[:, prompt - 1 :] == eos
        last = prompt - 1 + torch.where(stops.any(1), stops.float().argmax(1), stops.shape[1])
        pos = torch.arange(out.shape[1]).unsqueeze(0)
        toks.append(out)
        hidden.append(h)
        greedy.append(g)
        live.append(pos <= last.unsqueeze(1))
        print(f"  continued {min(i + batch, n)}/{n}", flush=True)
    return torch.cat(toks), torch.cat(hidden), torch.cat(greedy), torch.cat(live)


def chain(main, mtp: NextN, toks, hidden, steps: int, teacher: bool):
    """Logits of draft steps 1..`steps` at positions t = 0..L-1-steps.

    Step k's input token is x[t+k] (teacher) or the draft's own step k-1 proposal (k > 1)."""
    n = toks.shape[1] - steps
    embed = main.model.embed_tokens
    h, tok, out = hidden[:, :n], toks[:, 1 : 1 + n], []
    for k in range(1, steps + 1):
        if teacher:
            tok = toks[:, k : k + n]
        h = mtp(embed(tok), h)
        logits = main.lm_head(h)
        out.append(logits)
        tok = logits.argmax(-1)
    return out


def chain_loss(main, mtp, toks, hidden, greedy, live, steps: int, prompt: int, decay: float):
    n = toks.shape[1] - steps
    logits = chain(main, mtp, toks, hidden, steps, teacher=True)
    total, weight = 0.0, 0.0
    for k, lg in enumerate(logits, start=1):
        target = greedy[:, k : k + n]  # the main model's greedy token after x[..t+k]
        mask = live[:, k : k + n].clone()  # x[t+k] is still inside the continuation
        mask[:, : max(0, prompt - 1)] = False  # drafts start once decoding has
        ce = torch.nn.functional.cross_entropy(lg.transpose(1, 2), target, reduction="none")
        w = decay ** (k - 1)
        total = total + w * (ce * mask).sum() / mask.sum().clamp(min=1)
        weight += w
    return total / weight


@torch.no_grad()
def expected_accept(main, mtp, toks, hidden, greedy, live, prompt: int, steps=(1, 3, 5)):
    """Expected accept length (1 + leading drafts equal to the main model's greedy tokens) of a
    chain of each length, over decode positions whose whole chain stays in the continuation."""
    longest = max(steps)
    n = toks.shape[1] - longest
    logits = chain(main, mtp, toks, hidden, longest, teacher=False)
    hits = torch.stack(
        [lg.argmax(-1) == greedy[:, k : k + n] for k, lg in enumerate(logits, start=1)], dim=-1
    )  # [B, n, longest]
    ok = live[:, longest : longest + n].clone()
    ok[:, : max(0, prompt - 1)] = False
    result = {"positions": int(ok.sum())}
    for s in steps:
        lead = hits[..., :s].int().cumprod(-1).sum(-1).float()
        result[f"accept_length_{s}_step"] = round(1 + float(lead[ok].mean()), 3)
    result["step1_agrees_with_main_greedy"] = round(float(hits[..., 0][ok].float().mean()), 3)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--base", type=Path, default=None, help="default: bundled tiny-glm5-bf16")
    ap.add_argument("--init", type=Path, default=None, help="mtp-state.pt to start from")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--sequences", type=int, default=1536, help="train continuations")
    ap.add_argument("--held-out", type=int, default=64, help="held-out continuations")
    ap.add_argument("--prompt", type=int, default=48)
    ap.add_argument("--new", type=int, default=80, help="prompt + new <= index_topk: dense DSA")
    ap.add_argument("--steps", type=int, default=3, help="chain steps unrolled in training")
    ap.add_argument("--decay", type=float, default=0.8, help="loss weight of step k: decay^(k-1)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    main_model, _, train_ids, held_ids = frozen_main_and_corpus(args.base, args.seed, args.threads)
    assert args.prompt + args.new <= main_model.config.index_topk

    t0 = time.monotonic()
    print("held-out continuations", flush=True)
    held = continuations(
        main_model, held_ids, args.held_out, args.prompt, args.new, args.seed + 1, 64
    )
    print("train continuations", flush=True)
    train = continuations(
        main_model, train_ids, args.sequences, args.prompt, args.new, args.seed, 64
    )
    data_seconds = time.monotonic() - t0

    mtp = NextN(main_model).float()
    if args.init is not None:
        mtp.load_state_dict(torch.load(args.init))
    mtp.eval()
    before = expected_accept(main_model, mtp, *held, prompt=args.prompt)
    print(f"before: {before}", flush=True)
    gen = torch.Generator().manual_seed(args.seed)

    def batch_loss() -> torch.Tensor:
        pick = torch.randint(0, train[0].shape[0], (args.batch,), generator=gen)
        batch = (t[pick] for t in train)
        return chain_loss(main_model, mtp, *batch, args.steps, args.prompt, args.decay)

    step, seconds = train_for(mtp, args.minutes, args.lr, batch_loss)
    after = expected_accept(main_model, mtp, *held, prompt=args.prompt)
    print(f"after {step} steps ({seconds:.0f}s): {after}", flush=True)

    layer = main_model.config.num_hidden_layers
    meta = {
        "what": "NextN (MTP) layer of the tiny GLM-5 distilled on the main model's greedy "
        "continuations, chain of draft steps unrolled (scripts/distill_tiny_glm5_mtp.py)",
        "layer": layer,
        "init": str(args.init) if args.init else "main model's last layer",
        "train_continuations": args.sequences,
        "held_out_continuations": args.held_out,
        "prompt_tokens": args.prompt,
        "new_tokens": args.new,
        "unrolled_steps": args.steps,
        "step_loss_decay": args.decay,
        "batch": args.batch,
        "lr": args.lr,
        "steps": step,
        "data_seconds": round(data_seconds),
        "train_seconds": round(seconds),
        "held_out_before": before,
        "held_out_after": after,
        "held_out_note": "simulated chain (same-step keys), not SGLang's served counters",
    }
    save_layer(mtp, args.out, layer, meta)


if __name__ == "__main__":
    main()
