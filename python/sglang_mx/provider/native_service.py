"""The provider's native SGLang routes (what `sgl.RuntimeEndpoint` calls), on the same request
path as the OpenAI routes: key, validation, guards, rate and spend limits, a ledger row per
output sequence (a batch or `n` > 1 is billed per prompt and sample), cached tokens at the
cache-read price, per-key prefix-cache namespaces, cancellation when the client leaves.

Each output's `meta_info` gets its ledger row id as `id` and the billed OpenRouter usage
object (with `cost`) as `usage`; the rest of SGLang's reply passes through unchanged."""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from sglang_mx.provider import jsonio
from sglang_mx.provider.errors import ProviderError, error_body
from sglang_mx.provider.native import NativeRequest, model_info, validate_generate
from sglang_mx.provider.native_routes import GENERATE_ROUTE, NOT_IN_SGLANG
from sglang_mx.provider.pricing import ModelPricing
from sglang_mx.provider.relay import DONE, StreamRelay, UpstreamStreamError
from sglang_mx.provider.sse_response import EventStreamResponse
from sglang_mx.provider.usage import TokenCounts
from sglang_mx.provider.validation import ParsedRequest, parse_json

if TYPE_CHECKING:
    from sglang_mx.provider.keys import ApiKey
    from sglang_mx.provider.service import Provider

ENDPOINT = "generate"  # the metrics label
_DISCONNECT_POLL_S = 0.25


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


class Billing:
    """The ledger rows of one native request: one per output the upstream returns."""

    def __init__(self, p: Provider, key: ApiKey, req: NativeRequest, rid: str) -> None:
        self.p, self.key, self.rid = p, key, rid
        self.parsed = ParsedRequest(req.model, req.stream, req.max_new_tokens, req.upstream_body)
        # SGLang names a batch's requests `<rid>_<i>` (n = 1) when given one string rid.
        self.rows = [f"{rid}_{i}" for i in range(req.outputs)] if req.batch else [rid]
        self.counts = [TokenCounts() for _ in self.rows]
        for row in self.rows:
            p.ledger.start(row, key.id, req.model.id)

    def finish(self, status: str, error: str | None = None, zero: bool = False) -> None:
        for row, counts in zip(self.rows, self.counts, strict=True):
            self.p.finish(
                row, self.key, self.parsed, ENDPOINT, status, TokenCounts() if zero else counts,
                error,
            )  # fmt: skip

    def stamp(self, i: int, meta: dict[str, Any], final: bool) -> None:
        meta["id"] = self.rows[i]
        if final:
            meta["usage"] = self.counts[i].billed(self.parsed.model)

    def abort_upstream(self) -> None:
        for row in self.rows:  # `n` > 1 gets fresh rids upstream: the closed connection aborts
            asyncio.ensure_future(self.p.upstream.abort(row))


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
        p.admit(key, count=req.outputs)
        rid = f"gen-{uuid.uuid4().hex}"
        body = dict(req.upstream_body, rid=rid)
        if p.isolation_active():
            body["cache_salt"] = p.keys.cache_salt(key.id)
        if req.n > 1:
            await self._prefill(body, key, req, rid)
        bill = Billing(p, key, req, rid)
        if req.stream:
            return await self._stream(body, bill, req)
        return await self._unary(request, body, bill)

    async def _prefill(self, body: dict[str, Any], key: ApiKey, req: NativeRequest, rid: str):
        """For `n` > 1 SGLang prefills each prompt once, unreported, before sampling it n times
        (each sample then reads the prompt from cache). Doing that prefill here makes its
        cache writes visible, so they are billed once per prompt, like any other call."""
        pre = NativeRequest(req.model, False, req.prompts > 1, req.prompts, 1, 0, {})
        prefill = {k: body[k] for k in ("text", "input_ids", "cache_salt") if k in body}
        prefill.update(rid=f"{rid}-prefill", sampling_params={"max_new_tokens": 0})
        bill = Billing(self.p, key, pre, f"{rid}-prefill")
        try:
            data = await self.p.upstream.post_json(GENERATE_ROUTE, prefill)
        except Exception as e:
            bill.finish("error", str(e)[:500], zero=True)
            raise
        outputs = data if isinstance(data, list) else [data]
        for counts, out in zip(bill.counts, outputs, strict=False):
            counts_from_meta(out.get("meta_info") if isinstance(out, dict) else None, counts)
        bill.finish("ok")

    async def _unary(self, request: Request, body: dict[str, Any], bill: Billing) -> Response:
        p, t0 = self.p, time.perf_counter()
        call = asyncio.ensure_future(p.upstream.post_json(GENERATE_ROUTE, body))
        while not call.done():  # a client that leaves must not keep the upstream generating
            await asyncio.wait({call}, timeout=_DISCONNECT_POLL_S)
            if not call.done() and await request.is_disconnected():
                call.cancel()
                bill.abort_upstream()
                bill.finish("aborted", "client left", zero=True)
                return Response(status_code=499)
        try:
            data: Any = call.result()
        except Exception as e:  # every row leaves the ledger finalized, whatever failed
            bill.finish("error", str(e)[:500], zero=True)
            raise
        outputs = data if isinstance(data, list) else [data]
        if len(outputs) != len(bill.rows) or not all(isinstance(o, dict) for o in outputs):
            bill.finish("error", "upstream reply does not match the request", zero=True)
            raise ProviderError(
                502, "upstream reply does not match the request", "upstream_unavailable"
            )
        p.metrics.ttft.labels(bill.parsed.model.id).observe(time.perf_counter() - t0)
        for i, out in enumerate(outputs):
            meta = out.get("meta_info")
            if not isinstance(meta, dict):
                meta = out["meta_info"] = {}
            counts_from_meta(meta, bill.counts[i])
            bill.stamp(i, meta, final=True)
        bill.finish("ok")
        return Response(
            jsonio.dumps(data), media_type="application/json", headers={"X-Request-Id": bill.rid}
        )

    async def _stream(
        self, body: dict[str, Any], bill: Billing, req: NativeRequest
    ) -> EventStreamResponse:
        p = self.p
        stack = AsyncExitStack()
        opening = asyncio.ensure_future(
            stack.enter_async_context(p.upstream.stream(GENERATE_ROUTE, body))
        )
        # As for the OpenAI routes: a quick refusal keeps its HTTP status; a slow upstream gets
        # the SSE reply at once, with keep-alives until it answers.
        await asyncio.wait({opening}, timeout=p.settings.keepalive_s)
        if opening.done() and opening.exception() is not None:
            await stack.aclose()
            exc = opening.exception()
            bill.finish("error", str(exc), zero=True)
            raise exc
        relay = NativeStreamRelay(p, stack, opening, bill, req.batch)
        return EventStreamResponse(
            relay.events(),
            headers={"X-Request-Id": bill.rid, "Cache-Control": "no-cache",
                     "X-Accel-Buffering": "no"},
        )  # fmt: skip


class NativeStreamRelay(StreamRelay):
    """SGLang's native SSE (`data: {text, meta_info[, index]}` per chunk, cumulative text):
    relayed as is, each output's last chunk (finish_reason set) carrying its billed usage."""

    def __init__(
        self,
        p: Provider,
        stack: AsyncExitStack,
        opening: asyncio.Future[httpx.Response],
        bill: Billing,
        batch: bool,
    ) -> None:
        super().__init__(p, stack, opening, bill.rid, bill.key, bill.parsed, ENDPOINT)
        self.bill, self.batch = bill, batch

    def _index(self, chunk: dict[str, Any]) -> int:
        i = chunk.get("index", 0) if self.batch else 0
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(self.bill.rows):
            raise UpstreamStreamError(f"upstream sent an output index {str(i)[:20]} out of range")
        return i

    async def events(self):  # type: ignore[override]
        model, bill = self.parsed.model, self.bill
        status, error = "aborted", "client disconnected"
        t_start, t_last = time.perf_counter(), None
        lines = self._lines()
        try:
            async for chunk in self._upstream_events(lines):
                if isinstance(chunk, bytes):
                    yield chunk  # keep-alive comment
                    continue
                i = self._index(chunk)
                meta = chunk.get("meta_info")
                if not isinstance(meta, dict):
                    meta = chunk["meta_info"] = {}
                counts_from_meta(meta, bill.counts[i])
                bill.stamp(i, meta, final=meta.get("finish_reason") is not None)
                t_last = self._observe_token_gap(model.id, t_start, t_last)
                self.chunks += 1
                yield self._sse(chunk)
                if self.chunks % self.p.settings.ledger_flush_tokens == 0:
                    for row, c in zip(bill.rows, bill.counts, strict=True):  # crash billing
                        self.p.ledger.progress(row, c.prompt, c.completion, c.cached)
            status, error = "ok", None
            yield DONE
        except (UpstreamStreamError, httpx.HTTPError, ProviderError) as e:
            status, error = "error", str(e) or type(e).__name__
            if isinstance(e, ProviderError):
                code, reason, msg = e.status, e.reason, e.message
            else:
                code = 408 if isinstance(e, httpx.TimeoutException) else 502
                reason, msg = "upstream_stream_failed", f"upstream failed mid-stream: {error}"
            self.p.metrics.errors.labels(str(code), reason).inc()
            yield self._sse(error_body(code, msg, {"reason": reason}))
            yield DONE
        finally:
            if status == "aborted":
                bill.abort_upstream()  # client gone: free the KV now, not at the next token
            await self._close(lines)
            bill.finish(status, error)
