"""Teach the bundled tiny GLM-5 GLM's agent syntax (issue 44, item 4): offered tools, it answers
with a tool call SGLang's `glm47` parser reads; with thinking on, a reasoning block `glm45` reads.

Fine-tunes the main model (`tiny-glm5-bf16`) in place of a retrain, so what it already does is
kept, and so is its draft: the NextN layer reads the main model's final hidden state, so a drifting
state would cost the draft its acceptance. Each step is two batches:

1. **Agent chats** (`agent_chats.py`, with the chat template of `--template`): cross-entropy on
   the assistant's turn only.
2. **Corpus windows** (the train split): the frozen original is the teacher. KL(original ||
   model) on the next-token distribution, plus the mean squared distance of the final hidden
   state (after the final norm, what the draft reads) to the original's, weighted `--hidden-w`.

Attention runs as served (the indexers' top-`index_topk`), the indexers frozen (their selection
is what the fine-tune adapts to) and the router's correction bias unchanged. The held-out check
greedily generates the assistant turn of held-out chats (another seed) and counts the ones SGLang's
own `glm47` / `glm45` detectors parse to the asked tool and arguments; the corpus check is
held-out perplexity and the hidden-state distance, both before and after.

    nice python scripts/train_tiny_glm5_agent.py --template TEMPLATE --out build/agent \
        --minutes 20
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from pathlib import Path

import torch
from agent_chats import example, renderer
from sglang_mx_lab.testing import dsa_reference as dsa
from sglang_mx_lab.testing.corpus import encode_stream, stdlib_files
from sglang_mx_lab.testing.hf_reference import load_hf, perplexity
from tiny_common import train_parser

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
FLAGS = (
    ("--lr", float, 1e-3, "peak learning rate (cosine to 0 over --minutes)"),
    ("--chats", int, 8, "agent chats per step"),
    ("--windows", int, 4, "256-token corpus windows per step"),
    ("--corpus-w", float, 1.0, "weight of the corpus terms"),
    ("--hidden-w", float, 1.0, "weight of the hidden-state distance among them"),
    ("--eval-chats", int, 48, "held-out chats generated before and after"),
    ("--threads", int, 2, "torch threads"),
    ("--seed", int, 0, "data and sampling seed"),
)


def chat_batch(tok, rng, render, corpus_text, n: int):
    """[n, L] ids right-padded with eos, and [n, L] targets (-100 outside the assistant turn)."""
    eos = tok.eos_token_id
    rows = []
    for _ in range(n):
        _, prompt, target = example(rng, render, corpus_text)
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        t = tok(target, add_special_tokens=False)["input_ids"] + [eos]
        rows.append((p, t))
    width = max(len(p) + len(t) for p, t in rows)
    ids = torch.full((n, width), eos)
    labels = torch.full((n, width), -100)
    for i, (p, t) in enumerate(rows):
        ids[i, : len(p) + len(t)] = torch.tensor(p + t)
        labels[i, len(p) - 1 : len(p) + len(t) - 1] = torch.tensor(t)
    return ids, labels


def corpus_sampler(tok, ids: torch.Tensor, rng: random.Random):
    def sample():
        s = rng.randrange(0, len(ids) - 200)
        return tok.decode(ids[s : s + 96]), tok.decode(ids[s + 96 : s + 144])

    return sample


@torch.no_grad()
def parse_rate(model, tok, render, corpus_text, seed: int, n: int) -> dict:
    """Greedy assistant turns of `n` held-out chats, parsed by SGLang's glm47 / glm45 detectors."""
    from sglang.srt.entrypoints.openai.protocol import Function, Tool
    from sglang.srt.function_call.glm47_moe_detector import Glm47MoeDetector
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    rng = random.Random(seed)
    counts: dict[str, list[int]] = {}
    for _ in range(n):
        kind, prompt, target = example(rng, render, corpus_text)
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=96, do_sample=False,
            eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id,
        )  # fmt: skip
        text = tok.decode(out[0, len(ids) :], skip_special_tokens=True)
        ok = False
        if kind.startswith("call"):
            want = _parse(target)
            body = text.split("</think>", 1)[-1] if kind == "call" else text
            names = [want[0]]
            tools = [Tool(function=Function(name=name, parameters={})) for name in names]
            got = Glm47MoeDetector().detect_and_parse(body, tools).calls
            ok = (kind == "call_no_think" or "</think>" in text) and len(got) == 1
            ok = ok and got[0].name == want[0] and json.loads(got[0].parameters) == want[1]
        else:
            parsed = ReasoningParser("glm45", stream_reasoning=False, force_reasoning=True)
            reasoning, content = parsed.parse_non_stream(text)
            ok = bool(reasoning) and bool(content and content.strip())
        counts.setdefault(kind, [0, 0])
        counts[kind][0] += int(ok)
        counts[kind][1] += 1
    return {k: {"parsed": v[0], "of": v[1]} for k, v in sorted(counts.items())}


def _parse(target: str):
    """(name, arguments) of the one tool call in a target, values typed as the schema types them."""
    body = target.split("<tool_call>", 1)[1].split("</tool_call>", 1)[0]
    name, rest = body.split("<arg_key>", 1) if "<arg_key>" in body else (body, "")
    args = {}
    for pair in ("<arg_key>" + rest).split("<arg_key>")[1:]:
        key, value = pair.split("</arg_key><arg_value>")
        value = value.split("</arg_value>")[0]
        args[key] = int(value) if value.lstrip("-").isdigit() else value
    return name, args


def update(opt, loss: torch.Tensor, params) -> None:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()


def hidden_distance(model, ref, windows: torch.Tensor) -> float:
    with torch.no_grad():
        a = model.model(input_ids=windows, use_cache=False).last_hidden_state
        b = ref.model(input_ids=windows, use_cache=False).last_hidden_state
    return float(((a - b) ** 2).mean() / (b**2).mean())


def main() -> None:
    ap = train_parser(__doc__, minutes=20.0)
    ap.add_argument("--base", type=Path, default=None, help="default: bundled tiny-glm5-bf16")
    ap.add_argument("--template", type=Path, required=True, help="chat_template.jinja to ship")
    for flag, kind, default, what in FLAGS:
        ap.add_argument(flag, type=kind, default=default, help=what)
    args = ap.parse_args()

    from sglang_mx.assets import bundled_model_path
    from transformers import AutoTokenizer

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    base = args.base or Path(bundled_model_path("glm5-bf16"))
    args.out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy2(base / name, args.out / name)
    shutil.copy2(args.template, args.out / "chat_template.jinja")
    tok = AutoTokenizer.from_pretrained(str(args.out))
    render = renderer(tok)

    model = load_hf(base, torch.float32)
    ref = load_hf(base, torch.float32).requires_grad_(False)
    topk = model.config.index_topk
    for m in (model, ref):
        dsa.set_index_topk(m, topk)
    for i in dsa.indexer_layers(model):
        model.model.layers[i].self_attn.indexer.requires_grad_(False)
    params = [p for n, p in model.named_parameters() if p.requires_grad and "e_score" not in n]

    train_texts, held_texts = stdlib_files(int(args.corpus_mb * 1e6))
    train_ids = encode_stream(tok, train_texts, tok.eos_token_id)
    held_ids = encode_stream(tok, held_texts, tok.eos_token_id)
    held = held_ids.tolist()
    gen = torch.Generator().manual_seed(args.seed)
    probe = torch.stack([held_ids[s : s + 256] for s in range(0, 8 * 4096, 4096)])
    before = {
        "held_out_ppl": perplexity(model, held, window=256, max_windows=32),
        "chats": parse_rate(model, tok, render, corpus_sampler(tok, held_ids, random.Random(1)),
                            seed=10_000 + args.seed, n=args.eval_chats),
    }  # fmt: skip
    print(f"before: {before}", flush=True)

    rng = random.Random(args.seed)
    corpus_text = corpus_sampler(tok, train_ids, rng)
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    budget, start, step = args.minutes * 60.0, time.monotonic(), 0
    model.train()
    while (elapsed := time.monotonic() - start) < budget:
        lr = args.lr * min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * elapsed / budget))
        for group in opt.param_groups:
            group["lr"] = lr
        ids, labels = chat_batch(tok, rng, render, corpus_text, args.chats)
        logits = model(input_ids=ids, use_cache=False).logits
        chat = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100)
        starts = torch.randint(0, len(train_ids) - 257, (args.windows,), generator=gen)
        win = torch.stack([train_ids[s : s + 256] for s in starts.tolist()])
        out = model.model(input_ids=win, use_cache=False).last_hidden_state
        with torch.no_grad():
            ref_h = ref.model(input_ids=win, use_cache=False).last_hidden_state
            ref_logp = torch.log_softmax(ref.lm_head(ref_h), -1)
        logp = torch.log_softmax(model.lm_head(out), -1)
        kl = (ref_logp.exp() * (ref_logp - logp)).sum(-1).mean()
        drift = ((out - ref_h) ** 2).mean() / (ref_h**2).mean()
        update(opt, chat + args.corpus_w * (kl + args.hidden_w * drift), params)
        step += 1
        if step % 10 == 0:
            losses = f"chat {chat.item():.3f} kl {kl.item():.4f} drift {drift.item():.4f}"
            print(f"step {step} {losses} lr {lr:.2e} t {elapsed:.0f}s", flush=True)
    seconds = time.monotonic() - start
    model.eval()
    after = {
        "held_out_ppl": perplexity(model, held, window=256, max_windows=32),
        "hidden_distance": hidden_distance(model, ref, probe),
        "chats": parse_rate(model, tok, render, corpus_sampler(tok, held_ids, random.Random(1)),
                            seed=10_000 + args.seed, n=args.eval_chats),
    }  # fmt: skip
    print(f"after {step} steps in {seconds:.0f}s: {after}", flush=True)

    gates = [getattr(layer.mlp, "gate", None) for layer in model.model.layers]
    biases = [None if g is None else g.e_score_correction_bias.data.clone() for g in gates]
    bf16 = model.to(torch.bfloat16)
    for gate, bias in zip(gates, biases, strict=True):  # the correction bias ships fp32, as trained
        if gate is not None:
            gate.e_score_correction_bias.data = bias
    bf16.save_pretrained(args.out, safe_serialization=True)
    cfg = json.loads((base / "config.json").read_text())  # same keys, same order as shipped
    (args.out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    generation = base / "generation_config.json"  # a long-context base may not carry one
    if not generation.exists():
        generation = Path(bundled_model_path("glm5-bf16")) / "generation_config.json"
    shutil.copy2(generation, args.out / "generation_config.json")
    if (base / "training.json").exists():
        shutil.copy2(base / "training.json", args.out / "training.json")
    meta = {
        "steps": step,
        "seconds": round(seconds),
        "chats_per_step": args.chats,
        "windows_per_step": args.windows,
        "lr": args.lr,
        "corpus_w": args.corpus_w,
        "hidden_w": args.hidden_w,
        "index_topk": topk,
        "before": before,
        "after": after,
        "torch": torch.__version__,
        "threads": args.threads,
        "date": time.strftime("%Y-%m-%d"),
    }
    (args.out / "agent-training.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
