"""Compare two serving-probe records (`serve_probe`): a GPU run's against the CPU server's on the
same prompts. Each greedy request must give the same tokens, or first differ only where the CPU
itself had a near-tie; log-probs must agree within float32 noise.

Bounds (both sides serve in float32: `serve_probe.SERVE_ARGS`; the GPU's Triton dots in IEEE
fp32, TRITON_F32_DEFAULT=ieee in scripts/gpu_serve_check.sh), derived as test_dsa_serving
derives its float32 bound for this model:
- one side's logits are off exact arithmetic by at most delta = R * sqrt(K) * 2**-24 * L: R = 6
  chained reductions per layer, K = 2048 their longest length, L = 30 the largest |logit|;
  4 layers give delta ~ 2e-3; a log-prob moves at most 2 * delta (log-softmax);
- two sides: |lp_gpu - lp_cpu| <= TOL = 4 * delta for the same token in the same context;
- a greedy step where the GPU picked g and the CPU c: exact lp(c) - lp(g) <= TOL (the GPU's
  choice), so the CPU's own margin lp_cpu(c) - lp_cpu(g) <= 2 * TOL; g must be in the CPU's
  top log-probs with at most that margin. After a first difference nothing is compared (the
  contexts differ).
- prompts longer than index_topk: the DSA indexer selects keys from FP8 index scores, where
  float32 noise can swap near-tie keys; test_dsa_serving bounds that effect by G, the log-prob
  change FP8 index keys make (transformers, with and without them). Two FP8-keyed forwards that
  differ by float32 noise differ by at most 2 G (triangle inequality, on means over tokens):
  mean |prompt lp_gpu - prompt lp_cpu| <= 2 * mean(G) + TOL, and TOL_long = 2 * mean(G) + TOL
  replaces TOL for that request's generated tokens. Without G (`long_tol=None`) TOL applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

KINDS = ("short", "long", "repeat", "concurrent")


def float32_delta(layers: int, reductions_per_layer: int = 6, k: int = 2048, logit: float = 30.0):
    """Bound on one side's logit error in float32 (module docstring)."""
    return layers * reductions_per_layer * math.sqrt(k) * 2.0**-24 * logit


def float32_tol(layers: int) -> float:
    return 4 * float32_delta(layers)


@dataclass(frozen=True)
class Finding:
    where: str  # e.g. "short[1] step 7"
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def compare_answer(
    where: str, gpu: dict[str, Any], cpu: dict[str, Any], tol: float
) -> list[Finding]:
    out: list[Finding] = []
    g_ids, c_ids = gpu["output_ids"], cpu["output_ids"]
    for step, (g, c) in enumerate(zip(g_ids, c_ids, strict=False)):
        if g == c:
            gap = abs(gpu["logprobs"][step] - cpu["logprobs"][step])
            if gap > tol:
                out.append(Finding(f"{where} step {step}", f"log-prob gap {gap:.2e} > {tol:.2e}"))
            continue
        cpu_top = dict((int(t), lp) for t, lp in cpu["top"][step])
        if g not in cpu_top:
            out.append(
                Finding(f"{where} step {step}", f"token {g} vs {c}: not in the CPU's top log-probs")
            )
            return out
        margin = cpu_top[c] - cpu_top[g]
        if margin > 2 * tol:
            out.append(
                Finding(
                    f"{where} step {step}",
                    f"token {g} vs {c}: CPU margin {margin:.2e} > {2 * tol:.2e} (not a near-tie)",
                )
            )
        return out  # contexts differ from here on
    if len(g_ids) != len(c_ids):
        out.append(Finding(where, f"{len(g_ids)} tokens vs {len(c_ids)}"))
    return out


def compare(
    gpu: dict[str, Any], cpu: dict[str, Any], tol: float, long_tol: float | None = None
) -> list[Finding]:
    """Every difference between two records that the bounds do not allow (empty: they agree)."""
    if gpu["prompts"] != cpu["prompts"]:
        return [Finding("prompts", "the records were made on different prompts")]
    out: list[Finding] = []
    for kind in KINDS:
        g_list = (gpu.get("greedy") or {}).get(kind) or []
        c_list = (cpu.get("greedy") or {}).get(kind) or []
        if len(g_list) != len(c_list) or not c_list:
            out.append(Finding(kind, f"{len(g_list)} answers vs {len(c_list)}"))
            continue
        kind_tol = long_tol if kind == "long" and long_tol is not None else tol
        for i, (g, c) in enumerate(zip(g_list, c_list, strict=True)):
            if g is None or c is None:
                out.append(Finding(f"{kind}[{i}]", "no answer"))
                continue
            out += compare_answer(f"{kind}[{i}]", g, c, kind_tol)
            if kind == "long":
                gp, cp = g["prompt_logprobs"][1:], c["prompt_logprobs"][1:]
                mean = sum(abs(a - b) for a, b in zip(gp, cp, strict=True)) / max(len(cp), 1)
                if mean > kind_tol:
                    out.append(
                        Finding(
                            f"long[{i}] prompt", f"mean log-prob gap {mean:.2e} > {kind_tol:.2e}"
                        )
                    )
    return out
