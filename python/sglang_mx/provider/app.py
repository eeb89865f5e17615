"""FastAPI app of the provider: routes and the mapping of every failure to the OpenRouter
error shape (no tracebacks, no FastAPI `detail` bodies)."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sglang_mx.provider import listing
from sglang_mx.provider.core import Provider
from sglang_mx.provider.errors import ProviderError, bad_request, error_body
from sglang_mx.provider.generations import GenerationLog
from sglang_mx.provider.hotpath import (
    COMPLETION_ROUTES,
    CompletionFront,
    internal_error_response,
    provider_error_response,
)
from sglang_mx.provider.native_routes import MODEL_INFO_ROUTES
from sglang_mx.provider.native_service import NativeService
from sglang_mx.provider.openai_service import OpenAIService
from sglang_mx.provider.openrouter_routes import add_openrouter_routes
from sglang_mx.provider.settings import ProviderSettings

log = logging.getLogger(__name__)


def build_app(settings: ProviderSettings) -> CompletionFront:
    provider = Provider(settings)
    generations = GenerationLog(provider.ledger.db)  # stats for GET /api/v1/generation
    openai = OpenAIService(provider)
    native = NativeService(provider)  # SGLang's native routes for sgl.RuntimeEndpoint

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if provider.recovered:
            log.warning(
                "finalized %d ledger rows left pending by a previous run", provider.recovered
            )
        await provider.guard.refresh()  # learn the upstream's vocabulary and context length
        yield
        await provider.close()

    app = FastAPI(
        title="sglang-mx provider",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.provider = provider

    @app.exception_handler(ProviderError)
    async def _provider_error(request: Request, exc: ProviderError) -> JSONResponse:
        return provider_error_response(provider, exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        reason = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        provider.metrics.errors.labels(str(exc.status_code), reason).inc()
        msg = f"{request.method} {request.url.path}: {exc.detail}"
        return JSONResponse(
            error_body(exc.status_code, msg, {"reason": reason}), status_code=exc.status_code
        )

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
        return internal_error_response(provider, request.url.path)

    def listing_format(request: Request) -> str:
        # OpenRouter's current document (schema 2.4) unless ?format=legacy asks for the flat one.
        fmt = request.query_params.get("format", listing.SCHEMA_VERSION)
        if fmt not in listing.FORMATS:
            raise bad_request(f"format must be one of {listing.FORMATS}", "invalid_parameter")
        return fmt

    @app.get("/v1/models")
    async def models(request: Request) -> dict:
        provider.guard.refresh_soon(force=True)
        fmt = listing_format(request)
        docs = [listing.document(m, fmt) for m in provider.models.values()]
        return {"object": "list", "data": docs}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str, request: Request) -> dict:
        m = provider.models.get(model_id)
        if m is None:
            raise ProviderError(404, f"no model {model_id[:100]!r}", "unknown_model")
        return listing.document(m, listing_format(request))

    async def completion(request: Request) -> Response:
        return await openai.handle(request, COMPLETION_ROUTES[request.url.path])

    # CompletionFront serves these POSTs before FastAPI; the routes stay for the 405 on other
    # methods and for anyone mounting the bare FastAPI app.
    for path in COMPLETION_ROUTES:
        app.add_route(path, completion, methods=["POST"])

    add_openrouter_routes(app, provider, generations)  # /api/v1: OpenRouter's client API

    async def native_model_info(request: Request) -> dict:
        return native.model_info(request)

    for path in MODEL_INFO_ROUTES:  # RuntimeEndpoint's first call
        app.add_api_route(path, native_model_info, methods=["GET"])

    @app.get("/health")
    async def health() -> JSONResponse:
        if await provider.healthy():
            return JSONResponse({"status": "ok"})
        return JSONResponse(
            error_body(503, "upstream cannot generate", {"reason": "unhealthy"}), status_code=503
        )

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(provider.metrics.render(), media_type="text/plain; version=0.0.4")

    return CompletionFront(app, provider, openai, native)
