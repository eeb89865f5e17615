"""Extend the bundled tiny GLM-5 model past its 512 trained positions (issue 59): YaRN RoPE as
SGLang serves it, and DeepSeek-V3.2's two-stage indexer training, at lengths this CPU can hold.

Stages (`--stage`), each started from the weights of `--init` and writing weights to `--out`:

- `warmup`: the indexer's dense warm-up. Every weight but the indexers' is frozen, attention is
  dense, and each indexer learns KL(main attention summed over heads || softmax(index scores))
  over the causal keys, for its own layer and the "shared" layer that attends through it. Short
  sequences (2k-4k). DeepSeek-V3.2: lr 1e-3, indexer only.
- `sparse`: everything trains, attention through the indexer's top-`--topk` (2048) as served,
  the selection made under no_grad from the indexer's detached inputs. The LM loss moves the main
  model; the indexer's KL on its selected keys moves only the indexer.
- `joint`: everything trains with dense attention: the LM (and planted-value) loss moves the main
  model, the warm-up's KL over all causal keys moves the indexer (`--indexer-lr`). For lengths
  where the main model's own copy fails (dense recall 0.4 at 30k from sitting L2) and a sparse
  stage would train against a selection that misses the line: its KL, over the keys already
  selected, cannot teach the indexer to reach one it misses (sitting K). Not in DeepSeek-V3.2's
  recipe; with `--grad-tail` a 32k step is the warm-up's no-grad forward and a short backward.

The forward is `long_attention.forward` (query chunks, top-k keys per query, activation
checkpointing), equal to transformers' forward at short length
(test/scripts/test_long_trainer.py); the data is `long_data.LongData` (stdlib files with
references back and a planted key/value recalled 1k-30k tokens later; `--plants N` puts N lines
in a sequence). `--pose-target` trains far distances from short sequences by one positional skip
each (PoSE); tried once with 4 plants (sitting H, docs/tiny-model.md), it cost the indexers their
reach at 16k, so keep real long steps in the mix. `--grad-tail N` trains only a sequence's last
N tokens (and its answer rows), reading the rest without grad: a 32k step then costs a no-grad
forward and a short backward. `--teacher DIR` adds KL(teacher || model) on sequences of at most
512 tokens (the teacher's trained positions): the original model's short-context distribution
restored while the positions grow (sitting O). RoPE: `long_rope`, read
from SGLang 0.5.23's source. The output directory gets the bf16 weights, config.json (the
--init config with the YaRN rope_parameters, max_position_embeddings and index_topk set), the
tokenizer and a small record `long-training.json`; no optimizer state is ever written. Weights
are written every `--save-every` minutes and when the run is stopped (SIGTERM or SIGINT: the
step in flight ends first), so a sitting cut short keeps what it trained; the record's `final`
says whether the run ended at its budget (or --max-steps) rather than cut short.

    nice python scripts/train_tiny_glm5_long.py --stage warmup --seq-lens 2048,4096 \
        --minutes 60 --out build/long-warmup
    nice python scripts/train_tiny_glm5_long.py --stage sparse --init build/long-warmup \
        --seq-lens 4096,8192 --minutes 110 --out build/long-sparse
    nice python scripts/train_tiny_glm5_long.py --stage joint --init build/long-sparse \
        --seq-lens 32768,16384 --grad-tail 1024 --answer-weight 1 --out build/long-joint
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import shutil
import signal
import time
from pathlib import Path

import torch
from long_attention import DENSE, LongSettings, forward
from long_data import LongData, pose_positions
from long_rope import yarn_parameters

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
ORIGINAL_POSITIONS = 512  # what the bundled model was trained on


def yarn_config(model, max_positions: int, topk: int) -> dict:
    """Set the YaRN RoPE (factor max_positions / 512), context and index_topk on `model`'s
    config; returns the rope parameters."""
    cfg = model.config
    rope = yarn_parameters(max_positions / ORIGINAL_POSITIONS, ORIGINAL_POSITIONS,
                           theta=cfg.rope_parameters["rope_theta"])  # fmt: skip
    cfg.rope_parameters = rope
    cfg.max_position_embeddings = max_positions
    cfg.index_topk = topk
    return rope


def indexer_params(model) -> list[torch.nn.Parameter]:
    return [
        p
        for layer in model.model.layers
        if layer.self_attn.indexer is not None
        for p in layer.self_attn.indexer.parameters()
    ]


def prepare(model, stage: str) -> list[torch.nn.Parameter]:
    """Freeze what the stage does not train; the parameters it does."""
    if stage == "warmup":
        model.requires_grad_(False)
        for p in indexer_params(model):
            p.requires_grad_(True)
    else:
        model.requires_grad_(True)
    return [p for p in model.parameters() if p.requires_grad]


def param_groups(model, params: list, lr: float, indexer_lr: float) -> list[dict]:
    """AdamW groups, each with its `base_lr` (the schedule scales it): the indexers at
    `indexer_lr`, everything else trained at `lr`."""
    idx = {id(p) for p in indexer_params(model)}
    groups = [([p for p in params if id(p) not in idx], lr),
              ([p for p in params if id(p) in idx], indexer_lr)]  # fmt: skip
    return [{"params": ps, "lr": base, "base_lr": base} for ps, base in groups if ps]


# Longest sequence whose chunks' attention graphs all stay alive (about 0.5 GB per layer at 8k).
KEEP_CHUNKS_UP_TO = 8192


def grad_from(length: int, chunk: int, tail: int, answer: torch.Tensor | None) -> int:
    """The first row that trains when only the last `tail` tokens do (0: all), chunk-aligned and
    early enough to hold every answer row."""
    if tail <= 0 or tail >= length:
        return 0
    first = length - tail
    if answer is not None and bool(answer.any()):
        first = min(first, int(answer.nonzero()[0, 0]))
    return first // chunk * chunk


def lr_scale(step: int, frac: float, schedule: str) -> float:
    """Learning-rate factor: linear warm-up over 20 steps, then cosine to 0 at the budget's end
    (`frac` is the spent share of it) or held (`constant`, for a rung continued later)."""
    warm = min(1.0, (step + 1) / 20)
    if schedule == "constant":
        return warm
    return warm * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))


def settings(stage: str, topk: int, chunk: int, length: int, checkpoint_layers: bool = False,
             first_trained: int = 0) -> LongSettings:  # fmt: skip
    """Warm-up and joint: dense, KL for every layer attending through an indexer (the shared ones
    too, as the bundled model's own trainer did). Sparse: top-k, KL from the indexer's own layer
    only (DeepSeek-V3.2 has no shared layers; it halves the KL's cost). `first_trained`: rows
    before it run without grad (long_attention.forward's grad_from)."""
    dense = stage in ("warmup", "joint")
    return LongSettings(topk=DENSE if dense else topk, chunk=chunk, indexer_loss=True,
                        shared_kl=dense, checkpoint_chunks=length > KEEP_CHUNKS_UP_TO,
                        checkpoint_layers=checkpoint_layers,
                        grad_from=first_trained)  # fmt: skip


def train_step(model, opt, ids: torch.Tensor, st: LongSettings, stage: str,
               kl_weight: float = 1.0, answer: torch.Tensor | None = None,
               answer_weight: float = 0.0, answer_kl_weight: float = 0.0,
               positions: torch.Tensor | None = None, teacher_logits: torch.Tensor | None = None,
               teacher_weight: float = 0.0) -> dict:  # fmt: skip
    """One forward + backward + optimizer step on ids [L + 1]; the losses. `answer` [L] marks the
    planted value's tokens (long_data.Sample.answer): their mean cross-entropy is added with
    `answer_weight` (a handful of tokens in 4k-32k otherwise weigh nothing in the LM loss); their
    queries' indexer KL counts 1 + `answer_kl_weight` times (the indexer's one lesson in reaching
    the planted line, among thousands of queries that look near). `positions` [L]: RoPE
    positions with a skip (long_data.pose_positions); default 0..L-1. `teacher_logits` [L, V]:
    the short-context teacher's (see `teacher_kl`), added with `teacher_weight`."""
    qw = None
    if answer_kl_weight and answer is not None and bool(answer.any()):
        qw = 1.0 + answer_kl_weight * answer.float()
    logits, kl = forward(model, ids[:-1], st, qw, positions=positions)
    out = {}
    if stage == "warmup":
        lm = torch.zeros(())
        loss = kl
    else:
        tail = slice(st.grad_from, None)  # rows before grad_from carry no gradient
        lm = torch.nn.functional.cross_entropy(logits[tail], ids[1:][tail])
        loss = lm + kl_weight * kl
        if answer_weight and answer is not None and bool(answer.any()):
            recall = torch.nn.functional.cross_entropy(logits[answer], ids[1:][answer])
            loss = loss + answer_weight * recall
            out["answer"] = recall.item()
        if teacher_weight and teacher_logits is not None:
            distill = teacher_kl(teacher_logits[tail], logits[tail])
            loss = loss + teacher_weight * distill
            out["teacher_kl"] = distill.item()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    idx = {id(p) for p in indexer_params(model)}
    main = [p for p in model.parameters() if p.grad is not None and id(p) not in idx]
    if main:
        torch.nn.utils.clip_grad_norm_(main, 1.0)
    opt.step()
    return {"lm": lm.item(), "indexer_kl": kl.item(), **out}


def teacher_kl(teacher: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """Mean over rows of KL(softmax(teacher) || softmax(student)), both [N, V] logits: the
    original short-context model's next-token distribution restored on short text while the
    positions grow (LongReD's restoration distillation, Dong et al. 2025, on the output
    distribution only)."""
    t = torch.log_softmax(teacher.float(), dim=-1)
    s = torch.log_softmax(student.float(), dim=-1)
    return (t.exp() * (t - s)).sum(-1).mean()


def save_weights(model, init: Path, out: Path, record: dict) -> None:
    """bf16 weights, the init's config.json with the long-context keys, the tokenizer."""
    out.mkdir(parents=True, exist_ok=True)
    for gate in (getattr(layer.mlp, "gate", None) for layer in model.model.layers):
        if gate is not None:  # kept fp32, as GLM-5's checkpoints ship it
            gate.e_score_correction_bias.data = gate.e_score_correction_bias.float()
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    cfg = json.loads((init / "config.json").read_text())
    for key in ("rope_parameters", "max_position_embeddings", "index_topk"):
        cfg[key] = getattr(model.config, key)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    for name in TOKENIZER_FILES:
        if (init / name).exists():
            shutil.copy2(init / name, out / name)
    (out / "long-training.json").write_text(json.dumps(record, indent=2) + "\n")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--stage", choices=("warmup", "sparse", "joint"), required=True)
    ap.add_argument("--init", type=Path, default=None, help="default: the bundled glm5-bf16")
    ap.add_argument("--out", type=Path, required=True, help="weights directory to write")
    ap.add_argument("--seq-lens", default="4096,8192", help="cycled per step")
    ap.add_argument("--minutes", type=float, default=60.0, help="wall-clock budget")
    ap.add_argument("--save-every", type=float, default=15.0,
                    help="minutes between weight saves to --out (0: only at the end)")  # fmt: skip
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None,
                    help="default: 1e-3 warmup, 3e-4 sparse and joint")  # fmt: skip
    ap.add_argument("--indexer-lr", type=float, default=None,
                    help="the indexers' lr; default: --lr, 1e-3 in joint")  # fmt: skip
    ap.add_argument("--lr-schedule", choices=("cosine", "constant"), default="cosine",
                    help="after 20 warm-up steps: cosine to 0 at the budget, or held")  # fmt: skip
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--max-positions", type=int, default=32768, help="YaRN target length")
    ap.add_argument("--chunk", type=int, default=512, help="queries per attention chunk")
    ap.add_argument("--checkpoint-layers", action="store_true")
    ap.add_argument("--kl-weight", type=float, default=1.0)
    ap.add_argument("--answer-weight", type=float, default=0.0,
                    help="weight of the planted value's cross-entropy (sparse, joint)")  # fmt: skip
    ap.add_argument("--answer-kl-weight", type=float, default=0.0,
                    help="extra weight of the value queries' indexer KL (1 + this)")  # fmt: skip
    ap.add_argument("--min-gap", type=int, default=1024,
                    help="least tokens from the planted line to the end (long_data)")  # fmt: skip
    ap.add_argument("--max-gap", type=int, default=30720, help="... and most")
    ap.add_argument("--pose-target", type=int, default=0,
                    help="positional skips (PoSE) so a shorter sequence's distances reach this "
                         "many positions; 0: none")  # fmt: skip
    ap.add_argument("--plants", type=int, default=1,
                    help="planted lines a sequence, each asked at its end (long_data)")  # fmt: skip
    ap.add_argument(
        "--grad-tail",
        type=int,
        default=0,
        help="train only the last this many tokens (and every answer row), reading "
        "the rest without grad: a long step at a fraction of the cost; 0: all",
    )
    ap.add_argument(
        "--teacher",
        type=Path,
        default=None,
        help="short-context teacher (the bundled glm5-bf16 before the extension): KL to its "
        "next-token distribution on sequences within its 512 trained positions",
    )
    ap.add_argument("--teacher-weight", type=float, default=1.0, help="weight of that KL")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main() -> None:
    args = parser().parse_args()
    from sglang_mx.assets import bundled_model_path
    from tiny_common import load_eager
    from transformers import AutoTokenizer

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    init = args.init or Path(bundled_model_path("glm5-bf16"))
    model = load_eager(str(init)).train()
    yarn_config(model, args.max_positions, args.topk)
    params = prepare(model, args.stage)
    lr = args.lr or (1e-3 if args.stage == "warmup" else 3e-4)
    indexer_lr = args.indexer_lr or (1e-3 if args.stage == "joint" else lr)
    opt = torch.optim.AdamW(param_groups(model, params, lr, indexer_lr), betas=(0.9, 0.95),
                            weight_decay=0.0)  # fmt: skip
    data = LongData(AutoTokenizer.from_pretrained(str(init)), "train", seed=args.seed,
                    min_gap=args.min_gap, max_gap=args.max_gap, plants=args.plants)  # fmt: skip
    lens = [int(n) for n in args.seq_lens.split(",")]
    teacher = load_eager(str(args.teacher)).requires_grad_(False) if args.teacher else None
    pose_rng = random.Random(args.seed)
    budget, start, step = args.minutes * 60.0, time.monotonic(), 0
    stop = []  # SIGTERM or SIGINT: finish the step, save, exit

    def ask_stop(signum, _frame) -> None:
        stop.append(signum)

    signal.signal(signal.SIGTERM, ask_stop)
    signal.signal(signal.SIGINT, ask_stop)

    def save(weights, final: bool) -> None:
        record = {"stage": args.stage, "steps": step, "seconds": round(time.monotonic() - start),
                  "final": final, "seq_lens": lens, "lr": lr, "indexer_lr": indexer_lr,
                  "lr_schedule": args.lr_schedule,
                  "topk": args.topk,
                  "chunk": args.chunk, "kl_weight": args.kl_weight,
                  "answer_weight": args.answer_weight,
                  "answer_kl_weight": args.answer_kl_weight,
                  "gaps": [args.min_gap, args.max_gap], "plants": args.plants,
                  "pose_target": args.pose_target, "grad_tail": args.grad_tail,
                  "teacher": str(args.teacher) if teacher else None,
                  "teacher_weight": args.teacher_weight if teacher else 0.0,
                  "rope_parameters": model.config.rope_parameters,
                  "init": str(init), "torch": torch.__version__,
                  "date": time.strftime("%Y-%m-%d")}  # fmt: skip
        save_weights(weights, init, args.out, record)
        print(f"wrote {args.out} at step {step}", flush=True)

    saved_at = start
    while time.monotonic() - start < budget and step < (args.max_steps or 1 << 62) and not stop:
        frac = (time.monotonic() - start) / budget
        for group in opt.param_groups:
            group["lr"] = group["base_lr"] * lr_scale(step, frac, args.lr_schedule)
        sample = data.sample(step, lens[step % len(lens)])
        length = len(sample.ids) - 1
        first = grad_from(length, args.chunk, args.grad_tail, sample.answer)
        st = settings(args.stage, args.topk, args.chunk, length, args.checkpoint_layers, first)
        positions = None
        if args.pose_target:
            positions = pose_positions(sample, args.pose_target, pose_rng)
        taught = None
        if teacher is not None and positions is None and length <= ORIGINAL_POSITIONS:
            with torch.no_grad():  # within the teacher's trained positions only
                taught = teacher(input_ids=sample.ids[None, :-1]).logits[0]
        losses = train_step(model, opt, sample.ids, st, args.stage, args.kl_weight,
                            sample.answer, args.answer_weight, args.answer_kl_weight,
                            positions, taught, args.teacher_weight)  # fmt: skip
        step += 1
        span = "" if positions is None else f" positions {int(positions[-1]) + 1}"
        print(f"step {step} len {len(sample.ids) - 1}{span} {losses} "
              f"t {time.monotonic() - start:.0f}s", flush=True)  # fmt: skip
        if args.save_every > 0 and time.monotonic() - saved_at >= 60.0 * args.save_every:
            # a copy: save_weights casts what it saves to bf16, and training goes on in fp32
            save(copy.deepcopy(model), final=False)
            saved_at = time.monotonic()
    save(model.eval(), final=not stop)


if __name__ == "__main__":
    main()
