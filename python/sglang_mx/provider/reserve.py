"""A request's worst-case cost, reserved against its key's spend cap before the upstream call
(`Ledger.open`) and released when the row settles at the real cost.

The provider has no tokenizer, so the prompt side is bounded from the bytes it forwards: every
token of a byte-level BPE vocabulary covers at least one byte of text, and the JSON syntax around
each message (`{"role":"user","content":""}`, 28 bytes) outweighs the special tokens a chat
template adds per message; TEMPLATE_TOKENS covers the template's fixed text (its preamble, the
instructions it wraps around tool schemas). Token-id prompts are counted exactly. A template
that adds more than that beyond the request's own bytes would let a request cost more than it
reserved, and a cap be passed by that excess (the bundled GLM template's prompts measured 7,
220 and 13 tokens against bounds of 313, 556 and 518). The bound never passes the model's
context per prompt. The completion side is the request's max tokens (the validator fills in the
model's maximum when none is given)."""

from __future__ import annotations

from typing import Any

from sglang_mx.provider import jsonio
from sglang_mx.provider.pricing import ModelPricing

TEMPLATE_TOKENS = 256  # a chat template's own text per prompt, generously
_NOT_PROMPT = ("max_tokens", "max_new_tokens", "stream", "stream_options", "rid", "cache_salt")


def _token_ids(ids: Any) -> int | None:
    """Token count of a token-id prompt (one list, or a batch of lists), else None."""
    if isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
        return len(ids)
    if isinstance(ids, list) and ids and all(isinstance(p, list) for p in ids):
        return sum(len(p) for p in ids)
    return None


def prompt_bound(body: dict[str, Any], prompts: int = 1) -> int:
    """At most how many prompt tokens `body` (an upstream body) can make, over `prompts`
    prompts."""
    for field in ("input_ids", "prompt"):
        n = _token_ids(body.get(field))
        if n is not None:
            return n
    rest = {k: v for k, v in body.items() if k not in _NOT_PROMPT}
    return len(jsonio.dumps(rest)) + TEMPLATE_TOKENS * prompts


def worst_case_usd(
    model: ModelPricing, body: dict[str, Any], rows: int, prompts: int, max_new: int
) -> float:
    """USD the request can cost at most: its `prompts` prompts and `rows` outputs of at most
    `max_new` tokens each, nothing read from cache, plus the per-request fee of each row."""
    prompt = min(prompt_bound(body, prompts), model.context_length * prompts)
    return model.cost(prompt, rows * max_new, 0) + float(model.per_token("request")) * (rows - 1)
