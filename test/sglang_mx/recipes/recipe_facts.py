"""What public GLM-5.x deployments on MI355X run, as rules a launch recipe's flags are checked
against (issue 42: the recipe tests compared the JSON with literals copied from it). Each rule
names its public source (../shared/CONTEXT.md sections 11 and 14) and says which engines it
binds by their own flags, not by recipe name, so a new recipe is bound by the same facts.

`violations(engine_args, role)` lists every rule an engine's flags break."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def value(args: list[str], flag: str) -> str | None:
    """The value after `flag`, the flag itself for a switch, None when absent."""
    if flag not in args:
        return None
    i = args.index(flag)
    nxt = args[i + 1] if i + 1 < len(args) else None
    return flag if nxt is None or nxt.startswith("--") else nxt


def _eagle(args: list[str]) -> tuple[str | None, ...]:
    return tuple(value(args, f) for f in ("--speculative-num-steps", "--speculative-eagle-topk",
                                          "--speculative-num-draft-tokens"))  # fmt: skip


def _spec(args: list[str]) -> bool:
    return value(args, "--speculative-algorithm") in ("EAGLE", "NEXTN", "EAGLE3")


def _dp_attention(args: list[str]) -> bool:
    return "--enable-dp-attention" in args


def _tp_ep(args: list[str]) -> tuple[str | None, str | None]:
    return value(args, "--tp-size"), value(args, "--ep-size")


@dataclass(frozen=True)
class Fact:
    source: str
    binds: Callable[[list[str], str], bool]  # (engine flags, role) -> does this fact apply
    holds: Callable[[list[str]], bool]
    says: str


FACTS = (
    Fact("InferenceX glm5.2_fp4_mi355x_sglang_mtp.sh (PRs #2488/#2900); SGLang cookbook GLM-5.2",
         lambda a, r: True, lambda a: value(a, "--kv-cache-dtype") == "fp8_e4m3",
         "GLM-5.2 MXFP4 on MI355X serves an FP8 KV cache (--kv-cache-dtype fp8_e4m3)"),
    Fact("sglang PR #29313", lambda a, r: _spec(a),
         lambda a: "--disable-custom-all-reduce" in a,
         "EAGLE on ROCm needs --disable-custom-all-reduce (aiter's custom all-reduce deadlocks "
         "in target-verify at concurrency >= 16)"),
    Fact("SGLang cookbook GLM-5.2 (agents)", lambda a, r: True,
         lambda a: (value(a, "--tool-call-parser"), value(a, "--reasoning-parser"))
         == ("glm47", "glm45"),
         "agents need --tool-call-parser glm47 --reasoning-parser glm45"),
    Fact("SGLang speculative decoding: with top-k 1 a chain of N steps verifies N + 1 tokens",
         lambda a, r: _spec(a) and value(a, "--speculative-eagle-topk") == "1",
         lambda a: int(_eagle(a)[2] or 0) == int(_eagle(a)[0] or 0) + 1,
         "EAGLE num-draft-tokens = num-steps + 1 at top-k 1"),
    Fact("InferenceX MXFP4 agentic script (PRs #2488/#2900); sglang PR #37404 (MTP 5-1-6 on "
         "MXFP4 at GSM8K 0.9666)",
         lambda a, r: _tp_ep(a) == ("4", "4"), lambda a: _spec(a) and _eagle(a) == ("5", "1", "6"),
         "the TP4/EP4 MXFP4 throughput layout runs EAGLE 5/1/6"),
    Fact("SGLang cookbook GLM-5.2 low latency (TP8 + MTP 5/1/6)",
         lambda a, r: _tp_ep(a)[0] == "8" and not _dp_attention(a) and r == "engine",
         lambda a: _spec(a) and _eagle(a) == ("5", "1", "6"),
         "the single TP8 engine (low latency) runs EAGLE 5/1/6"),
    Fact("SGLang cookbook GLM-5.2 balanced (--tp 8 --dp 8 --enable-dp-attention, MTP 1/1/2)",
         lambda a, r: _dp_attention(a),
         lambda a: (value(a, "--tp-size"), value(a, "--dp-size")) == ("8", "8")
         and _spec(a) and _eagle(a) == ("1", "1", "2"),
         "DP attention runs TP8 x DP8 with EAGLE 1/1/2"),
    Fact("InferenceX multi-node AMD models.yaml (GLM-5 / GLM-5.2 1P1D)",
         lambda a, r: r in ("prefill", "decode"),
         lambda a: value(a, "--tp-size") == "8"
         and value(a, "--disaggregation-transfer-backend") in ("mori", "mooncake"),
         "each 1P1D side is TP8 and moves KV with MoRI (or Mooncake)"),
    Fact("InferenceX multi-node AMD models.yaml (GLM-5 / GLM-5.2 1P1D decode)",
         lambda a, r: r == "decode",
         lambda a: _dp_attention(a) and value(a, "--moe-dense-tp-size") == "1"
         and "--enable-dp-lm-head" in a,
         "the 1P1D decode runs --enable-dp-attention --moe-dense-tp-size 1 --enable-dp-lm-head"),
)  # fmt: skip


def violations(args: list[str], role: str = "engine") -> list[str]:
    """Every fact that binds this engine (role: "engine" for a single-node recipe, "prefill" or
    "decode" for a 1P1D side) and that its flags break, with its source."""
    return [f"{f.says} [{f.source}]" for f in FACTS if f.binds(args, role) and not f.holds(args)]


def router_violations(router: list[str], decode_args: list[str]) -> list[str]:
    """smg (SGLang Model Gateway) in PD mode (CONTEXT 14): --pd-disaggregation; a DP-attention
    decode is routed rank by rank (--dp-aware)."""
    out = []
    if "--pd-disaggregation" not in router:
        out.append("a 1P1D router runs --pd-disaggregation [smg launch --help]")
    if _dp_attention(decode_args) and "--dp-aware" not in router:
        out.append("a DP-attention decode is routed with --dp-aware [InferenceX models.yaml]")
    return out
