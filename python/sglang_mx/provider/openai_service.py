"""The provider's OpenAI routes (`/v1/chat/completions`, `/v1/completions`): authenticate,
validate, guard, limit, one ledger row, call the upstream (`upstream_call`), bill. Streams are
relayed by `OpenAIStreamRelay`: public model id on every chunk, a final usage chunk with cost
before `[DONE]`."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglang_mx.provider import jsonio
from sglang_mx.provider.context import RequestContext
from sglang_mx.provider.core import Provider
from sglang_mx.provider.errors import sse_error_event
from sglang_mx.provider.relay import DONE, StreamRelay, sse
from sglang_mx.provider.sse_response import EventStreamResponse
from sglang_mx.provider.upstream_call import ClientLeft, call_unary, open_stream
from sglang_mx.provider.validation import parse_json, validate_chat, validate_completion

ENDPOINTS = {
    "chat": ("/v1/chat/completions", validate_chat),
    "completions": ("/v1/completions", validate_completion),
}


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
        p.admit(key)
        ctx = p.new_context(key, parsed.model, endpoint)
        body = ctx.upstream_body(parsed.upstream_body)
        p.start_rows(ctx, [ctx.rid])
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
        p.metrics.ttft.labels(ctx.model.id).observe(time.perf_counter() - ctx.t0)
        p.finish(ctx, "ok")
        data["usage"] = counts.billed(ctx.model)
        mirror_reasoning(data.get("choices"), "message")
        data["model"] = ctx.model.id
        data["id"] = ctx.rid
        data["provider"] = "sglang-mx"
        return Response(
            jsonio.dumps(data), media_type="application/json", headers={"X-Request-Id": ctx.rid}
        )


class OpenAIStreamRelay(StreamRelay):
    """OpenAI chat/completion chunks: usage collected from the upstream's chunks, our usage
    chunk (with cost) last."""

    @property
    def obj(self) -> str:
        return "chat.completion.chunk" if self.ctx.endpoint == "chat" else "text_completion"

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        self.ctx.counts[0].update(chunk.pop("usage", None))
        if not chunk.get("choices"):
            return None  # upstream's own usage-only chunk; ours comes last
        chunk["model"], chunk["id"] = self.ctx.model.id, self.ctx.rid
        mirror_reasoning(chunk["choices"], "delta")
        return sse(chunk)

    def closing(self) -> list[bytes]:
        ctx, counts = self.ctx, self.ctx.counts[0]
        if counts.completion == 0:
            counts.completion = self.chunks
        final = {
            "id": ctx.rid,
            "object": self.obj,
            "created": self.created,
            "model": ctx.model.id,
            "provider": "sglang-mx",
            "choices": [],
            "usage": counts.billed(ctx.model),
        }
        return [sse(final), DONE]

    def error_event(self, code: int, msg: str, reason: str) -> bytes:
        return sse_error_event(
            self.ctx.rid, self.ctx.model.id, self.created, code, msg, reason, self.obj
        )
