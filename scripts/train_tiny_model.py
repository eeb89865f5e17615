"""Train the bundled tiny GLM-4.5-family MoE (Glm4MoeForCausalLM) on the Python standard library.

The corpus is present on any machine with Python: the stdlib's own .py sources. Files are split
by a stable hash into train and held-out sets, a byte-level BPE tokenizer is trained on the train
split, then the model trains for a bounded wall-clock time on 2 CPU cores. Writes a Hugging Face
checkpoint in bfloat16 (tokenizer, chat template and generation config included); the MXFP4 copy
is made afterwards with `sglang-mx quantize`.

    python scripts/train_tiny_model.py --out /tmp/tiny-bf16 --minutes 20
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch
from sglang_mx_lab.testing.corpus import encode_stream, stdlib_files
from tiny_common import shared_config, train_parser

SPECIAL_TOKENS = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>"]
# Minimal chat format the bundled tokenizer understands; SGLang's /v1/chat/completions applies it.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def train_tokenizer(texts: list[str], vocab_size: int, out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def make_config(vocab_size: int, eos_id: int, max_positions: int):
    from transformers import Glm4MoeConfig

    return Glm4MoeConfig(
        **shared_config(vocab_size, eos_id, max_positions),
        moe_intermediate_size=128,
        num_key_value_heads=2,  # GQA, group size 2
        head_dim=64,
        partial_rotary_factor=0.5,
        routed_scaling_factor=1.0,
        attention_bias=True,
        use_qk_norm=False,
        tie_word_embeddings=False,
        num_mtp_layers=0,
    )


@torch.no_grad()
def perplexity(model, data: torch.Tensor, seq_len: int, max_windows: int = 64) -> float:
    model.eval()
    n = min(max_windows, (len(data) - 1) // seq_len)
    total, count = 0.0, 0
    for i in range(n):
        x = data[i * seq_len : (i + 1) * seq_len + 1].unsqueeze(0)
        out = model(input_ids=x[:, :-1], labels=x[:, 1:].clone(), use_cache=False)
        # labels are pre-shifted here, so compute the loss directly on logits
        logits = out.logits.float()
        loss = torch.nn.functional.cross_entropy(
            logits.view(-1, logits.size(-1)), x[:, 1:].reshape(-1)
        )
        total += loss.item() * seq_len
        count += seq_len
    model.train()
    return math.exp(total / count)


def main() -> None:
    ap = train_parser(__doc__, minutes=20.0)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-positions", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from transformers import Glm4MoeForCausalLM

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)

    train_texts, held_texts = stdlib_files(int(args.corpus_mb * 1e6))
    tokenizer = train_tokenizer(train_texts, args.vocab, args.out)
    eos_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    train_ids = encode_stream(tokenizer, train_texts, eos_id)
    held_ids = encode_stream(tokenizer, held_texts, eos_id)
    print(f"corpus: train {len(train_ids):,} tokens, held-out {len(held_ids):,} tokens")

    config = make_config(len(tokenizer), eos_id, args.max_positions)
    model = Glm4MoeForCausalLM(config).float()
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters")

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    budget = args.minutes * 60.0
    gen = torch.Generator().manual_seed(args.seed)
    start = time.monotonic()
    step = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= budget:
            break
        # cosine schedule over wall-clock time, short warmup
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * frac))
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(train_ids) - args.seq_len - 1, (args.batch,), generator=gen)
        batch = torch.stack([train_ids[s : s + args.seq_len + 1] for s in starts.tolist()])
        out = model(input_ids=batch[:, :-1], use_cache=False)
        logits = out.logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1)
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            print(f"step {step} loss {loss.item():.3f} lr {lr:.2e} t {elapsed:.0f}s", flush=True)

    ppl = perplexity(model, held_ids, args.seq_len)
    print(f"trained {step} steps in {time.monotonic() - start:.0f}s; held-out ppl (fp32) {ppl:.2f}")
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = eos_id
    model.save_pretrained(args.out, safe_serialization=True)
    meta = {
        "steps": step,
        "minutes": args.minutes,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "train_tokens": len(train_ids),
        "held_out_tokens": len(held_ids),
        "held_out_ppl_fp32": ppl,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    (args.out / "training.json").write_text(json.dumps(meta, indent=2) + "\n")


if __name__ == "__main__":
    main()
