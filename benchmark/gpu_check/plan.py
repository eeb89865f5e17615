"""What the GPU check measures, what each case is estimated to cost, and the trim to a budget.

Pure Python (no torch): the CPU test checks the plan and its budgeting without a GPU.

Shapes are GLM-5.2's per GPU (CONTEXT.md section 2): MoE hidden 6144, moe_intermediate 2048,
256 experts, top-8, sliced per layout (TP8: every expert with I/8 = 256; EP8: 32 whole experts);
MLA latent 512 + rope 64 with an FP8 cache, 8 heads per rank under TP8 and 64 under DP attention;
DSA attends 2,048 selected keys; its indexer scores 32 heads x 128 over the whole context.

scripts/gpu_check.sh's profiles (GPU_CHECK_PROFILE=moe / attention) keep a subset of the kinds
(run.py --kinds), each to fit one run of at most 5 minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MOE_LAYOUTS = {
    "TP8": {"experts": 256, "hidden": 6144, "inter": 256},
    "EP8": {"experts": 32, "hidden": 6144, "inter": 2048},
}
MOE_TOKENS = (1, 4, 16, 64, 256)
# EP8 as SGLang dispatches it: global ids over 256 experts mapped to rank 0's 32 (others -1).
MOE_EP = {"layout": "EP8", "experts": 32, "global_experts": 256, "ep_rank": 0, "hidden": 6144,
          "inter": 2048, "tokens": 64}  # fmt: skip
TOP_K = 8
ATTN_HEADS = {"TP8": 8, "DP": 64}  # MLA heads per rank: TP8 of 64, DP attention (all 64)
CONTEXTS = (4096, 8192, 20480)
BATCHES = (1, 8, 32, 128)
DSA_TOP_K = 2048
INDEXER_HEADS, INDEXER_DIM = 32, 128
PAGE = 64
# MLA/DSA tile variants (sgl_kernel_rocm.attention.mla_decode.TILE_VARIANTS) timed beside the
# shipped table's pick at a headline point (20k context, batch 32): (kind, mode, variant).
TILE_VARIANT_ROWS = (("mla", "TP8", "keys_on_m"), ("mla", "TP8", "prefetch"))

# Tiny shapes for the CPU dry run (Triton interpreter): same code, seconds not minutes.
DRY = {
    "moe_layouts": {"TP8": {"experts": 8, "hidden": 128, "inter": 64}},
    "moe_tokens": (2,),
    "heads": {"TP8": 8, "DP": 16},
    "contexts": (96,),
    "batches": (2,),
    "dsa_top_k": 32,
    # top-8 of 32 global experts, 4 local: ~26% of the tokens fully masked.
    "moe_ep": {
        "layout": "EP8",
        "experts": 4,
        "global_experts": 32,
        "ep_rank": 0,
        "hidden": 128,
        "inter": 64,
        "tokens": 16,
    },
}

# Seconds per case on an H200 (estimates: Triton JIT ~2-4 s per new kernel variant, a
# do_bench_cudagraph of ~20 ms x (capture + warm-up + reps), float64 references on the GPU).
EST = {
    "compile": 4.0,
    "time": 0.8,
    "moe_setup": 1.5,  # random MXFP4 weights made on the device, routings
    "moe_profile": 1.0,  # per-kernel split from the profiler
    "check_attn": 2.0,
    "check_moe": 4.0,
}


@dataclass
class Case:
    kind: str  # "moe", "moe_nosplit", "moe_bf16", "mla", "dsa", "indexer", "check_moe", ...
    params: dict[str, Any]
    priority: int  # 0 first; cases of equal priority keep their order
    est_s: float
    compile_key: str = ""  # cases sharing a key share one JIT compile
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.kind + ":" + ",".join(f"{k}={v}" for k, v in self.params.items())


def _attn_priority(batch: int, ctx: int, batches, contexts) -> int:
    """Headline points first (the 20k target at batch 32+, then the extremes), fill-ins later."""
    if ctx == contexts[-1] and batch in (batches[-1], 32):
        return 1
    if batch in (batches[0], batches[-1]) or ctx in (contexts[0], contexts[-1]):
        return 2
    return 3


def build_plan(dry: bool = False, with_bf16_moe: bool = True) -> list[Case]:
    """Every case of the check."""
    layouts = DRY["moe_layouts"] if dry else MOE_LAYOUTS
    tokens = DRY["moe_tokens"] if dry else MOE_TOKENS
    heads_by = DRY["heads"] if dry else ATTN_HEADS
    contexts = DRY["contexts"] if dry else CONTEXTS
    batches = DRY["batches"] if dry else BATCHES
    top_k = DRY["dsa_top_k"] if dry else DSA_TOP_K
    plan: list[Case] = []
    # Correctness first, at the real shapes with the shipped tables: a fast wrong kernel is no
    # result.
    for lay in layouts:
        for m in sorted({tokens[0], tokens[-1] if dry else 16}):
            plan.append(Case("check_moe", {"layout": lay, **layouts[lay], "tokens": m}, 0,
                             EST["check_moe"] + EST["moe_setup"]))  # fmt: skip
    # EP8 with global routing: about a third of the tokens have no local expert.
    plan.append(Case("check_moe_ep", dict(DRY["moe_ep"] if dry else MOE_EP), 0,
                     EST["check_moe"] + EST["moe_setup"]))  # fmt: skip
    for mode, heads in heads_by.items():
        for kind in ("mla", "dsa"):
            plan.append(Case(f"check_{kind}", {"mode": mode, "heads": heads, "batch": 2,
                                               "ctx": contexts[-1], "top_k": top_k}, 0,
                             EST["check_attn"]))  # fmt: skip
    plan.append(Case("check_indexer", {"batch": 2, "ctx": contexts[-1]}, 0, EST["check_attn"]))
    # MoE: gate_up and down timed separately, every layout x token count.
    for lay, shape in layouts.items():
        for m in tokens:
            key = f"moe:{lay}:{m}"
            plan.append(Case("moe", {"layout": lay, **shape, "tokens": m}, 1 if m <= 64 else 2,
                             EST["time"] * 2 + EST["moe_profile"] + EST["moe_setup"],
                             compile_key=key))  # fmt: skip
            # The split-K A/B at decode (1 and 16 tokens; 4 fits nothing else in the moe
            # profile's budget): the same tile with SPLIT_K / SPLIT_K_DOWN dropped.
            if m in (tokens[0], 16):
                plan.append(Case("moe_nosplit", {"layout": lay, **shape, "tokens": m}, 1,
                                 EST["time"] * 2 + EST["moe_profile"] + EST["moe_setup"],
                                 compile_key=f"nosplit:{lay}:{m}"))  # fmt: skip
            if with_bf16_moe:
                plan.append(Case("moe_bf16", {"layout": lay, **shape, "tokens": m},
                                 2 if m <= 16 else 3,
                                 EST["time"] * 2 + EST["moe_profile"] + EST["moe_setup"] * 2,
                                 compile_key=f"bf16:{lay}:{m}"))  # fmt: skip
    # Decode attention: MLA dense and DSA sparse (FP8 latent), the indexer.
    for mode, heads in heads_by.items():
        for ctx in contexts:
            for b in batches:
                pr = _attn_priority(b, ctx, batches, contexts)
                for kind in ("mla", "dsa"):
                    plan.append(Case(kind, {"mode": mode, "heads": heads, "batch": b, "ctx": ctx,
                                            "top_k": top_k}, pr, EST["time"],
                                     compile_key=f"{kind}:{heads}:{b}"))  # fmt: skip
    for kind, mode, variant in TILE_VARIANT_ROWS:
        b = batches[-1] if dry else 32
        plan.append(Case(kind, {"mode": mode, "heads": heads_by[mode], "batch": b,
                                "ctx": contexts[-1], "top_k": top_k, "variant": variant}, 2,
                         EST["time"], compile_key=f"{kind}:{mode}:{b}:{variant}"))  # fmt: skip
    # The indexer: scores + top-k, the score kernel alone, torch's top-k alone (one compile).
    for ctx in contexts:
        for b in batches:
            pr = _attn_priority(b, ctx, batches, contexts)
            for kind in ("indexer", "indexer_scores", "indexer_topk"):
                plan.append(Case(kind, {"batch": b, "ctx": ctx}, pr,
                                 EST["time"], compile_key=f"indexer:{b}"))  # fmt: skip
    # The radix top-k (topk_radix.py) beside torch's, at the longest context (one compile).
    for b in sorted({batches[0], batches[-1] if dry else 32}):
        plan.append(Case("indexer_topk_radix", {"batch": b, "ctx": contexts[-1]}, 2, EST["time"],
                         compile_key="indexer_topk_radix"))  # fmt: skip
    return plan


def estimate(cases: list[Case]) -> float:
    """Seconds the cases should take: each case plus one compile per distinct compile key."""
    keys = {c.compile_key for c in cases if c.compile_key}
    return sum(c.est_s for c in cases) + EST["compile"] * len(keys)


def trim(plan: list[Case], budget_s: float) -> tuple[list[Case], list[Case]]:
    """Keep cases by priority (then plan order) while the estimate fits the budget; returns
    (kept in plan order, dropped)."""
    order = sorted(range(len(plan)), key=lambda i: (plan[i].priority, i))
    kept_idx: list[int] = []
    for i in order:
        trial = [plan[j] for j in kept_idx + [i]]
        if estimate(trial) <= budget_s:
            kept_idx.append(i)
    kept_set = set(kept_idx)
    kept = [c for i, c in enumerate(plan) if i in kept_set]
    dropped = [c for i, c in enumerate(plan) if i not in kept_set]
    return kept, dropped
