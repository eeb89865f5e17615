"""ASGI front of the provider app: POSTs to the two completion routes and SGLang's native
`/generate` go straight to the provider, as do SGLang's admin routes (refused, any method);
everything else (models, model info, health, metrics, 404/405, lifespan) to the FastAPI app.

The completion routes are the hot path; through FastAPI each request crosses six middleware
layers and the route table: ~100 of the provider's ~960 us of CPU per 1-token request when
measured (docs/provider.md, Benchmarks).
Errors keep the same shape and metrics as the FastAPI handlers (`app.py`)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sglang_mx.provider.core import Provider
from sglang_mx.provider.errors import ProviderError, error_body
from sglang_mx.provider.native_routes import GENERATE_ROUTE, NOT_IN_SGLANG, is_admin
from sglang_mx.provider.native_service import NativeService
from sglang_mx.provider.openai_service import OpenAIService

log = logging.getLogger(__name__)

COMPLETION_ROUTES = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    # OpenRouter's base (its SDKs' server_url): the same handlers, keys and ledger.
    "/api/v1/chat/completions": "chat",
    "/api/v1/completions": "completions",
}


def provider_error_response(provider: Provider, exc: ProviderError) -> JSONResponse:
    provider.metrics.errors.labels(str(exc.status), exc.reason).inc()
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def internal_error_response(provider: Provider, path: str) -> JSONResponse:
    log.exception("internal error on %s", path)
    provider.metrics.errors.labels("500", "internal").inc()
    return JSONResponse(
        error_body(500, "internal provider error", {"reason": "internal"}), status_code=500
    )


class CompletionFront:
    def __init__(
        self, app: Any, provider: Provider, openai: OpenAIService, native: NativeService
    ) -> None:
        self.app = app
        self.provider = provider
        self.openai, self.native = openai, native

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        endpoint = None
        if scope["type"] == "http":
            path, method = scope["path"], scope["method"]
            if method == "POST":
                endpoint = COMPLETION_ROUTES.get(path)
            if path == GENERATE_ROUTE and method in ("POST", "PUT"):
                endpoint = "generate"
            elif is_admin(path) or path in NOT_IN_SGLANG:
                endpoint = "refuse"
        if endpoint is None:
            await self.app(scope, receive, send)
            return
        try:
            request = Request(scope, receive)
            response: Response
            if endpoint == "generate":
                response = await self.native.handle(request)
            elif endpoint == "refuse":
                self.native.refuse(request, scope["path"])  # always raises
                raise AssertionError("unreachable")
            else:
                response = await self.openai.handle(request, endpoint)
        except ProviderError as exc:
            response = provider_error_response(self.provider, exc)
        except Exception:  # noqa: BLE001 - logged; the client gets the OpenRouter 500 shape
            response = internal_error_response(self.provider, scope["path"])
        await response(scope, receive, send)
