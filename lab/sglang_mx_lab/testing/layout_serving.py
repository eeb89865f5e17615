"""The production layouts the suite serves on the CPU box, and what is measured on each.

Shared by test/sglang_mx/recipes/test_layouts.py (which asserts) and scripts/layout_matrix.py (which
writes docs/results/layout-matrix-cpu.json and the table in docs/layouts.md from one run), so the
matrix in the docs is the suite's configurations, measured, not typed. Every layout serves the
default tiny GLM-5 (MLA + DSA + MXFP4 MoE + its trained NextN layer) in float32, so greedy output
can be compared token for token with the TP1 reference of the same KV-cache dtype.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
from sglang_mx import recipes
from sglang_mx.recipes import Substitution

PROMPTS = (
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    def __init__(self):\n        self.",
    "for i in range(10):\n    ",
)
NEW_TOKENS = 16
FP8 = ["--kv-cache-dtype", "fp8_e4m3"]
F32 = ["--dtype", "float32"]


@dataclass(frozen=True)
class Layout:
    name: str
    args: tuple[str, ...]
    reference: str | None  # the layout whose greedy tokens this one must equal
    about: str
    substitutions: tuple[Substitution, ...] = field(default=())


def layouts() -> list[Layout]:
    """TP1 references, SGLang's own EAGLE default at TP1, then every launch recipe's flag set
    as the CPU box runs it (recipes.cpu_args: 2 ranks, each substitution named)."""
    out = [
        Layout("tp1-fp8kv", (*F32, *FP8), None, "TP1 reference, FP8 KV (SGLang's layout here)"),
        Layout(
            "tp1-eagle-default",
            (*F32, *FP8, "--speculative-algorithm", "EAGLE"),
            "tp1-fp8kv",
            "only --speculative-algorithm EAGLE: SGLang picks steps / topk / draft tokens",
        ),
    ]
    for name in recipes.names():
        args, subs = recipes.cpu_args(name)
        about = recipes.recipe(name).about.split(":")[0]
        out.append(Layout(f"recipe:{name}", tuple(args), "tp1-fp8kv", about, tuple(subs)))
    return out


def greedy(url: str, prompt: str, tokens: int = NEW_TOKENS) -> dict:
    body = {"text": prompt, "sampling_params": {"max_new_tokens": tokens, "temperature": 0}}
    r = httpx.post(f"{url}/generate", json=body, timeout=600)
    r.raise_for_status()
    return r.json()


@dataclass
class Served:
    """One layout's greedy answers over PROMPTS and SGLang's speculative counters."""

    outputs: list[list[int]]
    verify_steps: int  # 0: no speculative decoding
    correct_drafts: int
    proposed_drafts: int

    @property
    def accept_length(self) -> float | None:
        """Tokens per target forward, decode only (the first token is the prefill's)."""
        if not self.verify_steps:
            return None
        return self.decoded / self.verify_steps

    @property
    def decoded(self) -> int:
        """Output tokens after each request's first (the prefill's)."""
        return sum(len(o) for o in self.outputs) - len(self.outputs)

    @property
    def kept_drafts(self) -> int:
        """Drafts that became output tokens: each verify step emits one token of its own, the
        rest were drafts. SGLang's correct_drafts also counts drafts kept past max_new_tokens."""
        return self.decoded - self.verify_steps


def serve_prompts(url: str) -> Served:
    got = [greedy(url, p) for p in PROMPTS]
    meta = [g["meta_info"] for g in got]
    return Served(
        [g["output_ids"] for g in got],
        sum(m.get("spec_verify_ct", 0) or 0 for m in meta),
        sum(m.get("spec_num_correct_drafts", 0) or 0 for m in meta),
        sum(m.get("spec_num_proposed_drafts", 0) or 0 for m in meta),
    )


def server_info(url: str) -> dict:
    return httpx.get(f"{url}/get_server_info", timeout=30).json()


SPEC_FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
LAYOUT_FIELDS = ("tp_size", "ep_size", "attn_dp_size", "dp_size", "kv_cache_dtype", *SPEC_FIELDS)


def effective(info: dict) -> dict:
    """The parallel / KV / speculative settings SGLang resolved (from /get_server_info)."""
    return {k: info.get(k) for k in LAYOUT_FIELDS if k in info}
