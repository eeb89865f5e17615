"""Streamed chat requests through the provider while something is killed, and what became of
them: completed, failed cleanly (an OpenAI-shaped error, fast) or hung; and whether the
provider's ledger kept every request exactly once, billed as its usage said."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

# What a provider answers when its upstream is gone or failing (no other status counts as clean).
CLEAN_FAILURE_STATUS = (502, 503, 504)


def stream_chat(
    url: str,
    key: str,
    model: str,
    prompt: str,
    max_tokens: int,
    bound_s: float,
    on_chunk: Callable[[int], None] | None = None,
    stall_s: float | None = None,
    count_tokens: bool = False,
) -> dict[str, Any]:
    """One streamed chat request (ignore_eos, so it runs max_tokens); how it ended and how long
    it took. A request still open after bound_s is cut by the client timeout and counts as
    hung (the timeout bounds each read; the loop bounds the whole stream, within one more read:
    the provider's SSE keep-alive comments keep reads coming while nothing else does). With
    stall_s, a stream with no new content for that long is cut and counts as hung too (slow but
    moving is not hung). on_chunk(n) is called after the n-th content chunk. With count_tokens,
    the request asks for logprobs and `tokens` counts their entries: one per token received
    (ledger_problems says what it misses)."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "stream": True, "ignore_eos": True}  # fmt: skip
    if count_tokens:
        body["logprobs"] = True
    t0 = time.monotonic()
    out: dict[str, Any] = {"status": None, "rid": None, "chunks": 0, "usage": None, "error": None,
                           "stalled": False, "tokens": 0 if count_tokens else None}  # fmt: skip
    progress = t0
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body,
                          headers={"Authorization": f"Bearer {key}"},
                          timeout=bound_s) as r:  # fmt: skip
            out["status"], out["rid"] = r.status_code, r.headers.get("x-request-id")
            if r.status_code != 200:
                out["error"] = r.read().decode(errors="replace")
            else:
                for line in r.iter_lines():
                    now = time.monotonic()
                    if now - t0 >= bound_s:  # a trickle is cut too
                        out["error"] = f"client gave up after {bound_s:.0f} s"
                        break
                    if stall_s is not None and now - progress >= stall_s:
                        out["error"], out["stalled"] = f"no content for {stall_s:.0f} s", True
                        break
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    event = json.loads(line[5:])
                    if "error" in event:
                        out["error"] = event["error"]
                    elif event.get("usage"):
                        out["usage"] = event["usage"]
                    elif _carries_output(event):
                        out["chunks"] += 1
                        if count_tokens:
                            out["tokens"] += _logprob_entries(event)
                        progress = time.monotonic()
                        if on_chunk is not None:
                            on_chunk(out["chunks"])
    except httpx.HTTPError as e:
        out["error"] = repr(e)
    out["elapsed"] = time.monotonic() - t0
    return out


def _carries_output(event: dict[str, Any]) -> bool:
    """A chunk with generated output (text, reasoning or a tool call), not the role-only opener
    SGLang sends first ({"role": "assistant", "content": ""}) nor a finish-only chunk: those
    carry no token, and counting them made a broken stream's chunks exceed its tokens."""
    for choice in event.get("choices") or ():
        delta = choice.get("delta") or {}
        if choice.get("text") or any(delta.get(k) for k in ("content", "reasoning_content",
                                                           "reasoning", "tool_calls")):  # fmt: skip
            return True
    return False


def _logprob_entries(event: dict[str, Any]) -> int:
    """Tokens a chunk carries by its logprobs (SGLang gives one entry per token, all of a
    coalesced chunk's steps included)."""
    return sum(len((c.get("logprobs") or {}).get("content") or ()) for c in event["choices"])


def _openai_error(text: str) -> bool:
    try:
        err = json.loads(text).get("error")
    except (ValueError, AttributeError):
        return False
    return isinstance(err, dict) and isinstance(err.get("message"), str)


def outcome(r: dict[str, Any], bound_s: float) -> str:
    """'completed', 'failed' (fast, OpenAI-shaped: a 5xx body or an error event in the stream),
    'hung' (outlived bound_s, or stalled: stream_chat's stall_s) or 'broken' (anything else:
    a bare disconnect, a 500, a 200 with neither usage nor error)."""
    if r["elapsed"] >= bound_s or r.get("stalled"):
        return "hung"
    if r["status"] == 200 and r["usage"] and not r["error"]:
        return "completed"
    if r["status"] == 200 and isinstance(r["error"], dict) and "message" in r["error"]:
        return "failed"
    if r["status"] in CLEAN_FAILURE_STATUS and _openai_error(r["error"] or ""):
        return "failed"
    return "broken"


def count(results: Iterable[dict[str, Any]], bound_s: float) -> dict[str, int]:
    counts = {"completed": 0, "failed": 0, "hung": 0, "broken": 0}
    for r in results:
        counts[outcome(r, bound_s)] += 1
    return counts


def ledger_problems(db: Path, results: Iterable[dict[str, Any]], max_tokens: int) -> list[str]:
    """Each request with a provider id has exactly one settled ledger row (none pending); a
    completed one is billed its usage's cost and tokens; a failed one at least the content chunks
    its client received, at most max_tokens, and where the client counted its tokens
    (stream_chat's count_tokens) within one above that count.

    The provider bills a failed stream the upstream's running usage on the last chunk it relayed
    (openai_service.OpenAIStreamRelay.chunk keeps each chunk's `usage`, asked for with
    continuous_usage_stats, and does not pass it on): every token behind what its client was
    sent, which the client must count for itself. Chunks cannot count it: SGLang 0.5.23
    coalesces a slow reader's queued steps into one chunk (tokenizer_manager.
    _coalesce_streaming_chunks; seen through smg as a running count of 1, 2, 3, 5), so they
    bound it from below only. The logprobs entries count it, coalesced steps included, but for
    a step whose text is empty (a special token skipped, the bytes of an unfinished UTF-8
    character held back): SGLang sends no chunk for it and drops its logprobs
    (serving_chat._generate_stream_content), so the bill is one above the count per such step.
    Hence within one, not equal; two such steps in one failed stream would fail the check (none
    in 3840 tokens of 24 streams of the bundled model: docs/results/stream-token-count-cpu.json).
    --ledger-flush-tokens 1 is beside the point here: it bounds what a provider that dies
    mid-stream loses (rows settled from its last progress write, test_replicas.py), not what a
    live relay bills for a failed upstream."""
    from sglang_mx.provider.ledger import Ledger

    rows = Ledger(db).rows()
    by_id: dict[str, list] = {}
    for row in rows:
        by_id.setdefault(row.id, []).append(row)
    problems = [f"{row.id}: still pending" for row in rows if row.status == "pending"]
    for r in results:
        if r["rid"] is None:
            continue
        found = by_id.get(r["rid"], [])
        if len(found) != 1:
            problems.append(f"{r['rid']}: {len(found)} ledger rows")
            continue
        row = found[0]
        if r["usage"]:
            if row.status != "ok" or row.completion_tokens != r["usage"]["completion_tokens"]:
                problems.append(f"{r['rid']}: row {row.status}/{row.completion_tokens} vs usage")
            elif abs(row.cost - (cost := r["usage"]["cost"])) > max(1e-6 * abs(cost), 1e-12):
                problems.append(f"{r['rid']}: billed {row.cost} vs usage cost {cost}")
        elif row.status == "ok" or row.completion_tokens > max_tokens:
            problems.append(f"{r['rid']}: failed, row {row.status}/{row.completion_tokens}")
        elif row.completion_tokens < r["chunks"]:
            problems.append(f"{r['rid']}: failed, billed {row.completion_tokens} tokens for the "
                            f"{r['chunks']} chunks its client received")  # fmt: skip
        elif r.get("tokens") is not None and not (
            r["tokens"] <= row.completion_tokens <= r["tokens"] + 1
        ):
            problems.append(f"{r['rid']}: failed, billed {row.completion_tokens} tokens for the "
                            f"{r['tokens']} its client received (its logprobs)")  # fmt: skip
    return problems
