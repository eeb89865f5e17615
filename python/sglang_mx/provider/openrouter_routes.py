"""OpenRouter's API surface as its clients (its SDKs, apps written against it) read it, under
`/api/v1` beside the OpenAI routes on `/v1`: the same completion handlers (`hotpath.py` routes
`POST /api/v1/chat/completions` and `/api/v1/completions` to them), the user-facing model list
(`catalog.py`), and the account reads of the calling key (`account.py`). `GET /v1/models` stays
the provider listing that OpenRouter's ingestion reads (`listing.py`)."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.requests import Request

from sglang_mx.provider import account, catalog
from sglang_mx.provider.core import Provider
from sglang_mx.provider.errors import ProviderError
from sglang_mx.provider.generations import GenerationLog

BASE = catalog.API_BASE


def add_openrouter_routes(app: FastAPI, provider: Provider, generations: GenerationLog) -> None:
    p = provider

    def model_or_404(model_id: str) -> dict:
        m = p.models.get(model_id)
        if m is None:
            raise ProviderError(404, f"no model {model_id[:100]!r}", "unknown_model")
        return {"data": catalog.model_document(m)}

    @app.get(BASE + "/models")
    async def models(request: Request) -> dict:
        return catalog.model_list(list(p.models.values()), dict(request.query_params))

    @app.get(BASE + "/models/count")
    async def models_count() -> dict:
        return {"data": {"count": len(p.models)}}

    @app.get(BASE + "/model/{author}/{slug}")
    async def model(author: str, slug: str) -> dict:  # the SDK's models.get
        return model_or_404(f"{author}/{slug}")

    @app.get(BASE + "/models/{model_id:path}")
    async def model_by_id(model_id: str) -> dict:
        return model_or_404(model_id)

    @app.get(BASE + "/key")
    async def key(request: Request) -> dict:
        k = p.authenticate(request)
        rpm = k.rpm if k.rpm is not None else p.settings.default_rpm
        return {"data": account.key_info(p.ledger, k, rpm)}

    @app.get(BASE + "/generation")
    async def generation(request: Request) -> dict:
        k = p.authenticate(request)
        gen_id = request.query_params.get("id")
        return {"data": account.generation(p.ledger, generations, k, gen_id)}

    @app.get(BASE + "/credits")
    async def credits(request: Request) -> dict:
        p.authenticate(request)
        raise ProviderError(404, account.NO_CREDITS, "credits_not_served")
