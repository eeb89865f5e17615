"""Train one NextN (MTP) layer for the bundled tiny GLM-5 model, as GLM-5 / DeepSeek-V3 train
theirs: the main model is frozen; at position t the MTP layer sees RMSNorm(embed(x[t+1])) and
RMSNorm(h[t]) (the main model's final hidden state, after its final norm, which is what SGLang's
EAGLE worker hands the draft), concatenated in that order, projects them with `eh_proj`, runs one
decoder layer (MLA + DSA indexer + MoE) and the shared head (`shared_head.norm`, then the main
model's tied lm_head), and is trained on the token after next, x[t+2].

Only the NextN parameters train. The decoder layer starts from the main model's last layer (its
indexer from the last "full" indexer layer), `eh_proj` from [I | I] / 2. Sequences are at most
`index_topk` tokens long, so the DSA selection is every key and attention is dense as trained.

Writes `mtp.safetensors` with the tensors under `model.layers.{num_hidden_layers}.*` (the names
GLM-5 checkpoints use for the MTP layer) and `mtp-training.json`;
`scripts/build_tiny_glm5_quark.py` puts them into the shipped Quark checkpoint.

    nice -n 10 python scripts/train_tiny_glm5_mtp.py --out /tmp/mtp --minutes 6
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from sglang_mx.measure.stamp import host_cpu
from sglang_mx_lab.testing.corpus import encode_stream, stdlib_files

SPEC = ("eh_proj", "enorm", "hnorm", "shared_head.norm")


class NextN(torch.nn.Module):
    """enorm / hnorm / eh_proj + a one-layer GlmMoeDsaModel whose final norm is shared_head.norm."""

    def __init__(self, main) -> None:
        from transformers import GlmMoeDsaConfig, GlmMoeDsaModel
        from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import GlmMoeDsaRMSNorm

        super().__init__()
        cfg = main.config.to_dict()
        last = cfg["num_hidden_layers"] - 1
        cfg.update(
            num_hidden_layers=1, first_k_dense_replace=0, mlp_layer_types=["sparse"],
            indexer_types=["full"], layer_types=[cfg["layer_types"][last]],
        )  # fmt: skip
        block_cfg = GlmMoeDsaConfig(**{k: v for k, v in cfg.items() if k != "model_type"})
        block_cfg._attn_implementation = "eager"
        hidden, eps = main.config.hidden_size, main.config.rms_norm_eps
        self.enorm = GlmMoeDsaRMSNorm(hidden, eps)
        self.hnorm = GlmMoeDsaRMSNorm(hidden, eps)
        self.eh_proj = torch.nn.Linear(2 * hidden, hidden, bias=False)
        self.block = GlmMoeDsaModel(block_cfg)
        self.block.embed_tokens = None  # the draft shares the main model's embedding and head
        with torch.no_grad():
            eye = torch.eye(hidden)
            self.eh_proj.weight.copy_(torch.cat([eye, eye], dim=1) / 2)
            src = main.model.layers[last].state_dict()
            indexer_owner = max(i for i, t in enumerate(main.config.indexer_types) if t == "full")
            for k, v in main.model.layers[indexer_owner].state_dict().items():
                if ".indexer." in k:
                    src[k] = v
            missing = self.block.layers[0].load_state_dict(src, strict=False).missing_keys
            assert not missing, missing

    def forward(self, embeds: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        x = self.eh_proj(torch.cat([self.enorm(embeds), self.hnorm(hidden)], dim=-1))
        return self.block(inputs_embeds=x, use_cache=False).last_hidden_state

    def checkpoint_tensors(self, layer: int) -> dict[str, torch.Tensor]:
        prefix = f"model.layers.{layer}"
        out = {
            f"{prefix}.eh_proj.weight": self.eh_proj.weight,
            f"{prefix}.enorm.weight": self.enorm.weight,
            f"{prefix}.hnorm.weight": self.hnorm.weight,
            f"{prefix}.shared_head.norm.weight": self.block.norm.weight,
        }
        for k, v in self.block.layers[0].state_dict().items():
            if k == "mlp.experts.gate_up_proj":  # [E, 2I, H], gate half first: one per expert
                for e, (gate, up) in enumerate(t.chunk(2, dim=0) for t in v):
                    out[f"{prefix}.mlp.experts.{e}.gate_proj.weight"] = gate
                    out[f"{prefix}.mlp.experts.{e}.up_proj.weight"] = up
            elif k == "mlp.experts.down_proj":  # [E, H, I]
                for e, down in enumerate(v):
                    out[f"{prefix}.mlp.experts.{e}.down_proj.weight"] = down
            else:
                out[f"{prefix}.{k}"] = v
        return {
            k: (v.float() if k.endswith("e_score_correction_bias") else v.to(torch.bfloat16))
            .detach()
            .contiguous()
            for k, v in out.items()
        }


def mtp_logits(main, mtp: NextN, batch: torch.Tensor) -> torch.Tensor:
    """Logits for x[t+2] at t = 0..L-3 of `batch` [B, L]."""
    with torch.no_grad():
        hidden = main.model(input_ids=batch[:, :-2], use_cache=False).last_hidden_state
        embeds = main.model.embed_tokens(batch[:, 1:-1])
    return main.lm_head(mtp(embeds, hidden))


@torch.no_grad()
def evaluate(main, mtp: NextN, ids: torch.Tensor, seq: int, windows: int) -> dict[str, float]:
    """Top-1 accuracy on x[t+2], and agreement with the main model's own greedy x[t+2] given
    x[..t+1] (what speculative decoding accepts)."""
    hit = agree = n = 0
    for w in range(windows):
        batch = ids[w * seq : w * seq + seq + 2].unsqueeze(0)
        if batch.shape[1] < seq + 2:
            break
        draft = mtp_logits(main, mtp, batch).argmax(-1)[0]
        greedy = main(input_ids=batch[:, :-1], use_cache=False).logits.argmax(-1)[0, 1:]
        hit += int((draft == batch[0, 2:]).sum())
        agree += int((draft == greedy).sum())
        n += draft.numel()
    return {"top1_next_next": hit / n, "agrees_with_main_greedy": agree / n, "positions": n}


def frozen_main_and_corpus(base: Path | None, seed: int, threads: int):
    """(frozen float32 main model, its tokenizer, train ids, held-out ids) of the corpus split."""
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.hf_reference import load_hf
    from transformers import AutoTokenizer

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    base = base or Path(bundled_model_path("glm5-bf16"))
    model = load_hf(base, torch.float32)
    model.requires_grad_(False)
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    train_texts, held_texts = stdlib_files()
    eos = tokenizer.eos_token_id
    return (
        model,
        tokenizer,
        encode_stream(tokenizer, train_texts, eos),
        encode_stream(tokenizer, held_texts, eos),
    )


def train_for(mtp: NextN, minutes: float, peak_lr: float, batch_loss) -> tuple[int, float]:
    """AdamW on the NextN parameters for `minutes` of wall time: lr warms up over 20 steps, then
    cosine to 0 at the end of the budget; `batch_loss()` draws a batch and returns its loss.
    Returns (steps, seconds)."""
    params = [p for p in mtp.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.0)
    budget, start, step = minutes * 60.0, time.monotonic(), 0
    mtp.train()
    while (elapsed := time.monotonic() - start) < budget:
        lr = peak_lr * min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * elapsed / budget))
        for group in opt.param_groups:
            group["lr"] = lr
        loss = batch_loss()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            print(f"step {step} loss {loss.item():.3f} lr {lr:.2e} t {elapsed:.0f}s", flush=True)
    mtp.eval()
    return step, time.monotonic() - start


def save_layer(mtp: NextN, out: Path, layer: int, meta: dict) -> None:
    """mtp.safetensors (checkpoint names), mtp-state.pt (to resume with --init) and
    mtp-training.json (`meta` with the torch version, the machine and the date)."""
    from safetensors.torch import save_file

    meta = {**meta, "torch": torch.__version__, "device": f"cpu ({host_cpu()})",
            "threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d")}  # fmt: skip

    out.mkdir(parents=True, exist_ok=True)
    save_file(mtp.checkpoint_tensors(layer), str(out / "mtp.safetensors"))
    torch.save(mtp.state_dict(), out / "mtp-state.pt")
    (out / "mtp-training.json").write_text(json.dumps(meta, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--base", type=Path, default=None, help="default: bundled tiny-glm5-bf16")
    ap.add_argument("--minutes", type=float, default=6.0)
    ap.add_argument("--tokens-per-step", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=128, help="<= index_topk: dense DSA")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-windows", type=int, default=24)
    ap.add_argument("--init", type=Path, default=None, help="resume from a run's mtp-state.pt")
    args = ap.parse_args()

    main_model, _, train_ids, held_ids = frozen_main_and_corpus(args.base, args.seed, args.threads)
    assert args.seq <= main_model.config.index_topk
    mtp = NextN(main_model).float()
    if args.init is not None:
        mtp.load_state_dict(torch.load(args.init))
    before = evaluate(main_model, mtp, held_ids, args.seq, args.eval_windows)
    print(f"before: {before}", flush=True)
    gen = torch.Generator().manual_seed(args.seed)
    batch_size = max(1, args.tokens_per_step // args.seq)

    def batch_loss() -> torch.Tensor:
        starts = torch.randint(0, len(train_ids) - args.seq - 3, (batch_size,), generator=gen)
        batch = torch.stack([train_ids[s : s + args.seq + 2] for s in starts.tolist()])
        logits = mtp_logits(main_model, mtp, batch)
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), batch[:, 2:].reshape(-1)
        )

    step, seconds = train_for(mtp, args.minutes, args.lr, batch_loss)
    after = evaluate(main_model, mtp, held_ids, args.seq, args.eval_windows)
    print(f"after {step} steps ({seconds:.0f}s): {after}", flush=True)

    layer = main_model.config.num_hidden_layers
    meta = {
        "what": "NextN (MTP) layer of the tiny GLM-5, loss on x[t+2], main model frozen",
        "layer": layer,
        "steps": step,
        "seconds": round(seconds),
        "seq": args.seq,
        "tokens_per_step": batch_size * args.seq,
        "lr": args.lr,
        "held_out_before": before,
        "held_out_after": after,
    }
    save_layer(mtp, args.out, layer, meta)


if __name__ == "__main__":
    main()
