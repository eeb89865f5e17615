"""Train the bundled tiny GLM-5-architecture model (GlmMoeDsaForCausalLM: MLA + DSA indexer + MoE)
on the Python standard library, reusing the tiny GLM-4.5 model's corpus split and tokenizer.

Shape: docs/tiny-model.md (GLM-5 section). Top-k selection is not differentiable, so the model
trains in two phases on one wall-clock budget:

1. Dense phase (first `--dense-frac` of the time). Every indexer's top-k is set above the sequence
   length, so attention is dense and the LM loss trains everything but the indexers. The indexers
   train beside it on their own loss: KL from the dense attention to softmax(index scores) over the
   causal keys. The target is the head-averaged attention probabilities, detached, averaged over
   the layers that attend through that indexer's top-k (the "full" layer and the "shared" layers
   after it, as GLM-5.2 shares one indexer's selection); the indexer's inputs are detached too, so
   this loss moves only indexer weights and the LM loss never does.
2. Sparse phase (the rest). Top-k = index_topk (128) as served; the indexers are frozen (a sparse
   attention is no target for them) and the LM adapts to attending through their selection.

Sequence lengths alternate between 128, 256 and 512 tokens (same tokens per step), so most
queries see more than index_topk keys and the sparse regime is trained. The router's
e_score_correction_bias is updated as in DeepSeek-V3's aux-loss-free balancing (a small step
against each expert's load imbalance), so the served correction-bias path has non-zero input.

Writes a Hugging Face checkpoint in bfloat16 with the SGLang-only config keys added (topk_method,
scoring_func, moe_layer_freq, the indexer-sharing keys); the MXFP4 copy is made afterwards with
`sglang-mx quantize`.

    nice python scripts/train_tiny_glm5.py --out /tmp/tiny-glm5-bf16 --minutes 25

On a GPU (no stdlib of the same Python there, so the corpus travels as token ids):

    python scripts/train_tiny_glm5.py --save-corpus .gl/corpus.pt --out /tmp/unused   # CPU box
    python scripts/train_tiny_glm5.py --corpus-ids .gl/corpus.pt --device cuda \
        --tokens-per-step 16384 --minutes 4 --out OUT/tiny-glm5-bf16                   # GPU
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import torch
from sglang_mx_lab.testing import dsa_reference as dsa
from sglang_mx_lab.testing.corpus import encode_stream, stdlib_files
from sglang_mx_lab.testing.hf_reference import perplexity
from tiny_common import shared_config, train_parser

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
INDEXER_TYPES = ["full", "shared", "full", "shared"]
# Config keys SGLang 0.5.23 reads that transformers' GlmMoeDsaConfig does not define.
SGLANG_KEYS = {
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "moe_layer_freq": 1,
    "num_nextn_predict_layers": 0,
    # The same sharing as indexer_types, in the keys older readers use: layer i is "full" iff
    # max(i - offset + 1, 0) % freq == 0.
    "index_topk_freq": 2,
    "index_skip_topk_offset": 1,
    "index_topk_pattern": "".join("F" if t == "full" else "S" for t in INDEXER_TYPES),
    # transformers' GLM-MoE-DSA indexer always applies interleaved RoPE; SGLang reads this key
    # (default False: half-split) to build its indexer RoPE the same way.
    "indexer_rope_interleave": True,
}


def make_config(vocab_size: int, eos_id: int, max_positions: int, index_topk: int):
    from transformers import GlmMoeDsaConfig

    return GlmMoeDsaConfig(
        **shared_config(vocab_size, eos_id, max_positions),
        # 96, not 128, and tied embeddings: the bf16 + MXFP4 pair must fit in 25 MB.
        moe_intermediate_size=96,
        tie_word_embeddings=True,
        num_key_value_heads=4,
        q_lora_rank=128,
        kv_lora_rank=512,
        qk_nope_head_dim=64,
        qk_rope_head_dim=64,
        v_head_dim=64,
        index_n_heads=4,
        index_head_dim=128,
        index_topk=index_topk,
        indexer_types=list(INDEXER_TYPES),
        routed_scaling_factor=2.5,
        rms_norm_eps=1e-5,
        bos_token_id=None,
    )


def copy_tokenizer(src: Path, out: Path):
    from transformers import AutoTokenizer

    for name in TOKENIZER_FILES:
        shutil.copy2(src / name, out / name)
    return AutoTokenizer.from_pretrained(str(out))


def indexer_loss(model, cap: dsa.Capture) -> torch.Tensor:
    losses = []
    for owner, members in dsa.indexer_groups(model).items():
        target = torch.stack([cap.attention[i] for i in members]).mean(0)
        hidden, q_resid, cos, sin = cap.indexer_inputs[owner]
        indexer = model.model.layers[owner].self_attn.indexer
        losses.append(dsa.indexer_kl(dsa.index_scores(indexer, hidden, q_resid, cos, sin), target))
    return torch.stack(losses).mean()


class BiasBalancer:
    """Aux-loss-free load balancing: e_score_correction_bias += rate * sign(mean load - load)."""

    def __init__(self, model, rate: float):
        self.rate = rate
        self.loads: dict[int, torch.Tensor] = {}
        self.gates = {}
        for i, layer in enumerate(model.model.layers):
            gate = getattr(layer.mlp, "gate", None)
            if gate is None:
                continue
            self.gates[i] = gate
            gate.register_forward_hook(self._hook(i))

    def _hook(self, i: int):
        def hook(mod, _args, out):
            self.loads[i] = torch.bincount(out[2].flatten(), minlength=mod.num_experts).float()

        return hook

    @torch.no_grad()
    def step(self) -> float:
        worst = 0.0
        for i, gate in self.gates.items():
            load = self.loads[i]
            gate.e_score_correction_bias += self.rate * torch.sign(load.mean() - load)
            worst = max(worst, float(load.max() / load.mean()))
        return worst


def main() -> None:
    ap = train_parser(__doc__, minutes=25.0)
    ap.add_argument("--dense-frac", type=float, default=0.75, help="time share of phase 1")
    ap.add_argument("--tokenizer-from", type=Path, default=None, help="default: tiny-glm-moe-bf16")
    ap.add_argument("--tokens-per-step", type=int, default=2048)
    ap.add_argument("--seq-lens", default="128,256,512", help="cycled per step")
    ap.add_argument("--index-topk", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--bias-rate", type=float, default=1e-3)
    # Default: the longest trained sequence. Past it quality is lost (RoPE positions never
    # seen; docs/tiny-model.md measures it), and SGLang serves this as the context length.
    ap.add_argument("--max-positions", type=int, default=None, help="default: max --seq-lens")
    ap.add_argument("--seed", type=int, default=0)
    # One thread: on a shared, loaded box a second thread mostly spins at barriers (measured: 5x
    # the CPU time per step at load 17 on 2 cores).
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-windows", type=int, default=16, help="256-token held-out windows")
    ap.add_argument("--device", default="cpu", help="train here (the eval runs on the CPU)")
    ap.add_argument("--corpus-ids", type=Path, default=None, help="token ids from --save-corpus")
    ap.add_argument("--save-corpus", type=Path, default=None, help="write the ids here and exit")
    args = ap.parse_args()

    from sglang_mx.assets import bundled_model_path
    from transformers import GlmMoeDsaForCausalLM

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    tok_src = args.tokenizer_from or Path(bundled_model_path("bf16"))
    tokenizer = copy_tokenizer(tok_src, args.out)
    eos_id = tokenizer.eos_token_id
    if args.corpus_ids is not None:
        saved = torch.load(args.corpus_ids)
        train_ids, held_ids = saved["train"].long(), saved["held"].long()
    else:
        train_texts, held_texts = stdlib_files(int(args.corpus_mb * 1e6))
        train_ids = encode_stream(tokenizer, train_texts, eos_id)
        held_ids = encode_stream(tokenizer, held_texts, eos_id)
    if args.save_corpus is not None:
        args.save_corpus.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"train": train_ids.short(), "held": held_ids.short()}, args.save_corpus)
        print(f"wrote {args.save_corpus}")
        return
    print(f"corpus: train {len(train_ids):,} tokens, held-out {len(held_ids):,} tokens", flush=True)

    max_positions = args.max_positions or max(int(n) for n in args.seq_lens.split(","))
    config = make_config(len(tokenizer), eos_id, max_positions, args.index_topk)
    # eager attention: the indexer's target is the attention probabilities, which SDPA hides
    model = GlmMoeDsaForCausalLM._from_config(config, attn_implementation="eager").float()
    model.to(args.device)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters", flush=True)
    indexer_params = {
        id(p)
        for i in dsa.indexer_layers(model)
        for p in model.model.layers[i].self_attn.indexer.parameters()
    }
    balancer = BiasBalancer(model, args.bias_rate)

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    seq_lens = [int(s) for s in args.seq_lens.split(",")]
    budget = args.minutes * 60.0
    gen = torch.Generator().manual_seed(args.seed)
    start = time.monotonic()
    step, dense_steps, sparse = 0, 0, False
    dsa.set_index_topk(model, dsa.DENSE)
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= budget:
            break
        if not sparse and elapsed >= args.dense_frac * budget:
            sparse, dense_steps = True, step
            dsa.set_index_topk(model, args.index_topk)
            for i in dsa.indexer_layers(model):
                model.model.layers[i].self_attn.indexer.requires_grad_(False)
            print(
                f"step {step}: sparse phase (index_topk {args.index_topk}), indexers frozen",
                flush=True,
            )
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * frac))
        for group in opt.param_groups:
            group["lr"] = lr
        seq = seq_lens[step % len(seq_lens)]
        batch_size = max(1, args.tokens_per_step // seq)
        starts = torch.randint(0, len(train_ids) - seq - 1, (batch_size,), generator=gen)
        batch = torch.stack([train_ids[s : s + seq + 1] for s in starts.tolist()])
        batch = batch.to(args.device)
        with dsa.capture(model, attention=not sparse) as cap:
            logits = model(input_ids=batch[:, :-1], use_cache=False).logits
        lm = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1)
        )
        kl = indexer_loss(model, cap) if not sparse else torch.zeros(())
        opt.zero_grad(set_to_none=True)
        (lm + kl).backward()
        torch.nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if id(p) not in indexer_params], 1.0
        )
        opt.step()
        imbalance = balancer.step()
        step += 1
        if step % 25 == 0:
            print(
                f"step {step} seq {seq} lm {lm.item():.3f} indexer-kl {kl.item():.3f} "
                f"max-load {imbalance:.2f}x lr {lr:.2e} t {elapsed:.0f}s",
                flush=True,
            )
    seconds = time.monotonic() - start

    model.eval()
    model.cpu()
    ids = held_ids.tolist()
    ppl = {}
    for name, k in (("sparse", args.index_topk), ("dense", dsa.DENSE)):
        dsa.set_index_topk(model, k)
        ppl[name] = perplexity(model, ids, window=256, max_windows=args.eval_windows)
    dsa.set_index_topk(model, args.index_topk)
    print(f"trained {step} steps in {seconds:.0f}s; held-out ppl (fp32) {ppl}")

    model = model.to(torch.bfloat16)
    for gate in balancer.gates.values():  # kept in fp32, as GLM-5's own checkpoints ship it
        gate.e_score_correction_bias.data = gate.e_score_correction_bias.float()
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = eos_id
    model.generation_config.bos_token_id = None
    model.save_pretrained(args.out, safe_serialization=True)
    cfg_path = args.out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    for key in ("_attn_implementation", "attn_implementation"):
        cfg.pop(key, None)
    cfg.update(SGLANG_KEYS)
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    meta = {
        "steps": step,
        "dense_steps": dense_steps,
        "sparse_steps": step - dense_steps,
        "seconds": round(seconds),
        "minutes": args.minutes,
        "seq_lens": seq_lens,
        "tokens_per_step": args.tokens_per_step,
        "index_topk": args.index_topk,
        "parameters": n_params,
        "train_tokens": len(train_ids),
        "held_out_tokens": len(held_ids),
        "held_out_ppl_fp32": ppl,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
        "date": time.strftime("%Y-%m-%d"),
    }
    (args.out / "training.json").write_text(json.dumps(meta, indent=2) + "\n")


if __name__ == "__main__":
    main()
