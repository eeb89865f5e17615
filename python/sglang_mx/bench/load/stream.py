"""One streaming request to an OpenAI-compatible endpoint, timed: its body, where it goes, and
`send_one`, which records TTFT, inter-token latencies, E2E, usage and any failure (a failed
request is a result, never an exception). The runner, its load workers (loadgen.py) and the
priming requests share these."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable

from sglang_mx.measure.metrics import RequestResult


def request_body(cfg, model: str, prompt, max_tokens: int, stream: bool, text: str) -> dict:
    body: dict = {"model": model, "max_tokens": max_tokens, "temperature": 0.0, "stream": stream}
    if cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = prompt if cfg.send_ids else text
    if stream:
        body["stream_options"] = {"include_usage": True}
    if cfg.ignore_eos:
        body["ignore_eos"] = True
    body.update(cfg.extra_body)
    return body


def refusal(cfg, status: int, detail: str) -> str:
    """A refused request's error; where token ids were sent and the body's prompt was refused
    (smg 1.13's OpenAI routes, as sglang-router 0.3.2's did, take a prompt as text only: HTTP 400
    "prompt: data did not match any variant of untagged enum StringOrArray"; 422 on 0.3.2), it
    names the flag that sends text."""
    out = f"HTTP {status}: {detail}"
    if cfg.send_ids and cfg.api != "chat" and status in (400, 422) and "prompt" in detail:
        out += " (this endpoint refuses token-id prompts, as smg does: --send-text)"
    return out


def endpoint_path(cfg) -> str:
    return "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"


def cached_tokens(usage: dict) -> int:
    details = usage.get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)


def delta_text(chunk: dict) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    return c.get("text") or (c.get("delta") or {}).get("content") or ""


async def send_one(
    client,
    cfg,
    model: str,
    ids: list[int],
    text: str,
    req_id: str,
    max_tokens: int,
    t0: float,
    intended: float | None = None,
    on_first: Callable[[], None] | None = None,
) -> RequestResult:
    """One streaming request; timings relative to t0 (the run's start); `intended` is when it
    was due (perf_counter), for the schedule lag; `on_first` is called as its first token
    arrives."""
    res = RequestResult(request_id=req_id, requested_output=max_tokens)
    if cfg.send_ids and cfg.api != "chat":
        res.client_prompt_tokens = len(ids)
    body = request_body(cfg, model, ids, max_tokens, True, text)
    sent = time.perf_counter()
    res.start = sent - t0
    if intended is not None:
        res.lag = sent - intended
    last = None
    usage: dict = {}
    pieces: list[str] = []
    try:
        async with client.stream("POST", cfg.base_url + endpoint_path(cfg), json=body) as resp:
            if resp.status_code >= 400:
                detail = (await resp.aread()).decode(errors="replace")[:300]
                res.error = refusal(cfg, resp.status_code, detail)
                return res
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank lines and SSE comments (keep-alives)
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    res.error = f"in-stream error: {chunk['error']}"
                    return res
                now = time.perf_counter()
                if piece := delta_text(chunk):
                    pieces.append(piece)
                    if last is None:
                        res.ttft = now - sent
                        if on_first is not None:
                            on_first()
                    else:
                        res.itl.append(now - last)
                    last = now
                if chunk.get("usage"):
                    usage = chunk["usage"]
    except Exception as exc:  # a network failure is a failed request, not a crashed run
        res.error = f"{type(exc).__name__}: {exc}"
        return res
    res.e2e = time.perf_counter() - sent
    res.output_text = "".join(pieces)
    res.usage_reported = bool(usage)
    res.prompt_tokens = int(usage.get("prompt_tokens") or len(ids))
    res.completion_tokens = int(usage.get("completion_tokens") or (len(res.itl) + 1))
    res.cached_tokens = cached_tokens(usage)
    if math.isnan(res.ttft):
        res.error = "no tokens streamed"
    return res
