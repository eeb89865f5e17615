"""The provider's native SGLang routes (what `sgl.RuntimeEndpoint` calls), on the same request
path as the OpenAI routes: key, validation, guards, rate and spend limits, a ledger row per
output sequence (a batch or `n` > 1 is billed per prompt and sample), cached tokens at the
cache-read price, per-key prefix-cache namespaces, cancellation when the client leaves.

Each output's `meta_info` gets its ledger row id as `id` and the billed OpenRouter usage
object (with `cost`) as `usage`; the rest of SGLang's reply passes through unchanged."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglang_mx.provider import jsonio
from sglang_mx.provider.context import RequestContext
from sglang_mx.provider.core import Provider
from sglang_mx.provider.errors import ProviderError, error_body
from sglang_mx.provider.keys import ApiKey
from sglang_mx.provider.native import NativeRequest, model_info, validate_generate
from sglang_mx.provider.native_routes import GENERATE_ROUTE, NOT_IN_SGLANG
from sglang_mx.provider.pricing import ModelPricing
from sglang_mx.provider.relay import DONE, StreamRelay, UpstreamStreamError, sse
from sglang_mx.provider.sse_response import EventStreamResponse
from sglang_mx.provider.unary_reply import unary_reply
from sglang_mx.provider.upstream_call import ClientLeft, call_unary, open_stream
from sglang_mx.provider.usage import TokenCounts
from sglang_mx.provider.validation import parse_json

ENDPOINT = "generate"  # the metrics label


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def counts_from_meta(meta: Any, counts: TokenCounts) -> None:
    """SGLang's meta_info (prompt, completion, cached, reasoning tokens) into `counts`."""
    if not isinstance(meta, dict):
        return
    counts.prompt = _int(meta.get("prompt_tokens")) or counts.prompt
    counts.completion = _int(meta.get("completion_tokens")) or counts.completion
    counts.cached = _int(meta.get("cached_tokens")) or counts.cached
    counts.reasoning = _int(meta.get("reasoning_tokens")) or counts.reasoning


def output_rows(rid: str, req: NativeRequest) -> list[str]:
    """One ledger row per output; SGLang names a batch's requests `<rid>_<i>` (n = 1) when
    given one string rid."""
    return [f"{rid}_{i}" for i in range(req.outputs)] if req.batch else [rid]


def stamp(ctx: RequestContext, i: int, meta: dict[str, Any], final: bool) -> None:
    """Output i's meta_info: its ledger row id, and on its last chunk its billed usage."""
    meta["id"] = ctx.rows[i]
    if final:
        meta["usage"] = ctx.counts[i].billed(ctx.model)


class NativeService:
    def __init__(self, provider: Provider) -> None:
        self.p = provider

    def model(self) -> ModelPricing | None:
        """The priced model the upstream serves: the only one priced, else the one whose
        `upstream_model` is the name the upstream reports."""
        models = self.p.models
        if len(models) == 1:
            return next(iter(models.values()))
        served = self.p.guard.served
        hits = [m for m in models.values() if m.upstream_model in served]
        return hits[0] if len(hits) == 1 else None

    def model_info(self, request: Request) -> dict[str, Any]:
        self.p.authenticate(request)
        return model_info(self.model(), self.p.guard.limits)

    def refuse(self, request: Request, path: str) -> None:
        """Admin and absent routes: the key is checked first (401 before 403)."""
        self.p.authenticate(request)
        if path in NOT_IN_SGLANG:
            raise ProviderError(404, f"{path}: {NOT_IN_SGLANG[path]}", "not_found")
        raise ProviderError(
            403,
            f"{path} administers the server and is not open to customer keys; operators call "
            "it on the SGLang server itself",
            "admin_route",
        )

    async def handle(self, request: Request) -> Response | EventStreamResponse:
        p = self.p
        key = p.authenticate(request)
        req = validate_generate(parse_json(await request.body()), p.models, self.model())
        p.guard.check_native(req.upstream_body)
        ctx = p.new_context(key, req.model, ENDPOINT)
        body = ctx.upstream_body(req.upstream_body)
        if req.n > 1:  # admitted before its prefill runs
            p.admit(key, count=req.outputs)
            await self._prefill(body, key, req, ctx.rid)
            p.start_rows(ctx, output_rows(ctx.rid, req), body)
        else:
            p.admit_and_open(ctx, output_rows(ctx.rid, req), body, count=req.outputs)
        if req.stream:

            def relay(stack, opening):
                return NativeStreamRelay(
                    ctx, p, p.metrics, p.settings, stack, opening, batch=req.batch
                ).events()

            # As for the OpenAI routes: a quick refusal keeps its HTTP status; a slow upstream
            # gets the SSE reply at once, with keep-alives until it answers.
            return await open_stream(
                p.upstream, p, p.settings.keepalive_s, ctx, GENERATE_ROUTE, body, relay
            )
        try:
            data = await call_unary(p.upstream, p, request, ctx, GENERATE_ROUTE, body)
        except ClientLeft:
            return Response(status_code=499)
        return self._reply(ctx, data)

    async def _prefill(self, body: dict[str, Any], key: ApiKey, req: NativeRequest, rid: str):
        """For `n` > 1 SGLang prefills each prompt once, unreported, before sampling it n times
        (each sample then reads the prompt from cache). Doing that prefill here makes its
        cache writes visible, so they are billed once per prompt, like any other call."""
        p = self.p
        pre = NativeRequest(req.model, False, req.prompts > 1, req.prompts, 1, 0, {})
        prefill = {k: body[k] for k in ("text", "input_ids", "cache_salt") if k in body}
        prefill.update(rid=f"{rid}-prefill", sampling_params={"max_new_tokens": 0})
        ctx = RequestContext(f"{rid}-prefill", key, req.model, ENDPOINT)
        p.start_rows(ctx, output_rows(ctx.rid, pre), prefill)
        try:
            data = await p.upstream.post_json(GENERATE_ROUTE, prefill)
        except Exception as e:
            p.finish(ctx, "error", str(e)[:500], zero=True)
            raise
        outputs = data if isinstance(data, list) else [data]
        for counts, out in zip(ctx.counts, outputs, strict=False):
            counts_from_meta(out.get("meta_info") if isinstance(out, dict) else None, counts)
        p.finish(ctx, "ok")

    def _reply(self, ctx: RequestContext, data: Any) -> Response:
        p = self.p
        outputs = data if isinstance(data, list) else [data]
        if len(outputs) != len(ctx.rows) or not all(isinstance(o, dict) for o in outputs):
            p.finish(ctx, "error", "upstream reply does not match the request", zero=True)
            raise ProviderError(
                502, "upstream reply does not match the request", "upstream_unavailable"
            )
        p.metrics.ttft.labels(ctx.model.id).observe(time.perf_counter() - ctx.t0)
        for i, out in enumerate(outputs):
            meta = out.get("meta_info")
            if not isinstance(meta, dict):
                meta = out["meta_info"] = {}
            counts_from_meta(meta, ctx.counts[i])
            stamp(ctx, i, meta, final=True)
        return unary_reply(
            p.settings.shared_store, jsonio.dumps(data), ctx.rid, lambda: p.finish(ctx, "ok")
        )


class NativeStreamRelay(StreamRelay):
    """SGLang's native SSE (`data: {text, meta_info[, index]}` per chunk, cumulative text):
    relayed as is, each output's last chunk (finish_reason set) carrying its billed usage."""

    def __init__(self, *args: Any, batch: bool = False) -> None:
        super().__init__(*args)
        self.batch = batch

    def _index(self, chunk: dict[str, Any]) -> int:
        i = chunk.get("index", 0) if self.batch else 0
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(self.ctx.rows):
            raise UpstreamStreamError(f"upstream sent an output index {str(i)[:20]} out of range")
        return i

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        i = self._index(chunk)
        meta = chunk.get("meta_info")
        if not isinstance(meta, dict):
            meta = chunk["meta_info"] = {}
        counts_from_meta(meta, self.ctx.counts[i])
        stamp(self.ctx, i, meta, final=meta.get("finish_reason") is not None)
        return sse(chunk)

    def closing(self) -> list[bytes]:
        return [DONE]

    def error_event(self, code: int, msg: str, reason: str) -> bytes:
        return sse(error_body(code, msg, {"reason": reason}))
