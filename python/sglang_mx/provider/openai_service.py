"""The provider's OpenAI routes (`/v1/chat/completions`, `/v1/completions`): authenticate,
validate, guard, limit, one ledger row, call the upstream (`upstream_call`), bill. Streams are
relayed by `OpenAIStreamRelay`: public model id on every chunk, a final usage chunk with cost
before `[DONE]`. Replies carry what OpenRouter's response schema adds to OpenAI's
(`system_fingerprint`, `provider`, `native_finish_reason`, usage with cost), and each finished
request leaves its generation stats (`generations.py`) for `GET /api/v1/generation`."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglang_mx.provider import jsonio
from sglang_mx.provider.account import PROVIDER_NAME
from sglang_mx.provider.context import RequestContext
from sglang_mx.provider.core import Provider
from sglang_mx.provider.errors import sse_error_event
from sglang_mx.provider.generations import GenerationStats
from sglang_mx.provider.relay import DONE, StreamRelay, sse
from sglang_mx.provider.sse_response import EventStreamResponse
from sglang_mx.provider.unary_reply import unary_reply
from sglang_mx.provider.upstream_call import ClientLeft, call_unary, open_stream
from sglang_mx.provider.validation import parse_json, validate_chat, validate_completion

ENDPOINTS = {
    "chat": ("/v1/chat/completions", validate_chat),
    "completions": ("/v1/completions", validate_completion),
}
# SGLang's finish reasons outside OpenRouter's set (tool_calls, stop, length, content_filter,
# error); the upstream's own stays in `native_finish_reason`.
_FINISH_REASONS = {"abort": "error"}


def finish_reasons(choices: Any) -> str | None:
    """Normalize each choice's finish_reason to OpenRouter's set, keeping the upstream's as
    `native_finish_reason`; returns the first choice's native reason."""
    first = None
    for choice in choices if isinstance(choices, list) else ():
        native = choice.get("finish_reason") if isinstance(choice, dict) else None
        if native is None:
            continue
        first = native if first is None else first
        choice["native_finish_reason"] = native
        choice["finish_reason"] = _FINISH_REASONS.get(native, native)
    return first


def mirror_reasoning(choices: Any, part: str) -> None:
    """OpenRouter's `reasoning` beside SGLang's `reasoning_content` in each choice's message
    (unary) or delta (stream), the same text, so clients reading either name get it."""
    for choice in choices if isinstance(choices, list) else ():
        body = choice.get(part) if isinstance(choice, dict) else None
        if isinstance(body, dict) and body.get("reasoning_content") is not None:
            body.setdefault("reasoning", body["reasoning_content"])


class OpenAIService:
    def __init__(self, provider: Provider) -> None:
        self.p = provider

    async def handle(self, request: Request, endpoint: str) -> Response | EventStreamResponse:
        p = self.p
        path, validate = ENDPOINTS[endpoint]
        key = p.authenticate(request)
        parsed = validate(parse_json(await request.body()), p.models)
        p.guard.check(parsed.upstream_body)
        ctx = p.new_context(key, parsed.model, endpoint)
        body = ctx.upstream_body(parsed.upstream_body)
        p.admit_and_open(ctx, [ctx.rid], body)
        if parsed.stream:
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}

            def relay(stack, opening):
                return OpenAIStreamRelay(ctx, p, p.metrics, p.settings, stack, opening).events()

            return await open_stream(p.upstream, p, p.settings.keepalive_s, ctx, path, body, relay)
        try:
            data = await call_unary(p.upstream, p, request, ctx, path, body)
        except ClientLeft:
            return Response(status_code=499)
        return self._reply(ctx, data)

    def _reply(self, ctx: RequestContext, data: dict[str, Any]) -> Response:
        p, counts = self.p, ctx.counts[0]
        counts.update(data.get("usage"))
        elapsed = time.perf_counter() - ctx.t0
        p.metrics.ttft.labels(ctx.model.id).observe(elapsed)
        choices = data.get("choices")
        mirror_reasoning(choices, "message")
        native = finish_reasons(choices)
        ctx.stats = GenerationStats(
            ctx.rid, "completions", False, _FINISH_REASONS.get(native, native), native,
            counts.reasoning, elapsed * 1000.0,
        )  # fmt: skip
        data["usage"] = counts.billed(ctx.model)
        data["model"] = ctx.model.id
        data["id"] = ctx.rid
        data["provider"] = PROVIDER_NAME
        data.setdefault("system_fingerprint", None)
        # the last store call of a served request: the row and its stats in one transaction,
        # a store lost now is retried by the lease thread, never a 503 for billed tokens
        return unary_reply(
            p.settings.shared_store, jsonio.dumps(data), ctx.rid, lambda: p.finish(ctx, "ok")
        )


class OpenAIStreamRelay(StreamRelay):
    """OpenAI chat/completion chunks: usage collected from the upstream's chunks, our usage
    chunk (with cost) last; the generation's stats recorded when it ends or fails."""

    native_finish: str | None = None  # the upstream's last finish reason
    first_chunk_at: float | None = None

    @property
    def obj(self) -> str:
        return "chat.completion.chunk" if self.ctx.endpoint == "chat" else "text_completion"

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        self.ctx.counts[0].update(chunk.pop("usage", None))
        if not chunk.get("choices"):
            return None  # upstream's own usage-only chunk; ours comes last
        chunk["model"], chunk["id"] = self.ctx.model.id, self.ctx.rid
        chunk["provider"] = PROVIDER_NAME
        if self.first_chunk_at is None:
            self.first_chunk_at = time.perf_counter()
        mirror_reasoning(chunk["choices"], "delta")
        self.native_finish = finish_reasons(chunk["choices"]) or self.native_finish
        return sse(chunk)

    def _record(self, finish: str | None) -> None:
        """The generation lookup's row, settled with the ledger row when the relay ends."""
        since = self.first_chunk_at
        ms = (time.perf_counter() - since) * 1000.0 if since is not None else None
        counts = self.ctx.counts[0]
        self.ctx.stats = GenerationStats(
            self.ctx.rid, "completions", True, finish, self.native_finish, counts.reasoning, ms
        )

    def closing(self) -> list[bytes]:
        ctx, counts = self.ctx, self.ctx.counts[0]
        if counts.completion == 0:
            counts.completion = self.chunks
        final = {
            "id": ctx.rid,
            "object": self.obj,
            "created": self.created,
            "model": ctx.model.id,
            "provider": PROVIDER_NAME,
            "choices": [],
            "usage": counts.billed(ctx.model),
        }
        native = self.native_finish
        self._record(_FINISH_REASONS.get(native, native) if native else None)
        return [sse(final), DONE]

    def error_event(self, code: int, msg: str, reason: str) -> bytes:
        self._record("error")
        return sse_error_event(
            self.ctx.rid, self.ctx.model.id, self.created, code, msg, reason, self.obj
        )
