"""The HTTP body guard on a real FastAPI app shaped like SGLang's routes: non-object JSON gets a
400, objects (sent in pieces) reach the route intact, a crash inside body parsing (a `before`
validator calling `.get` on a list, as SGLang 0.5.23's chat request does) becomes a 400 while a
crash in the route itself stays a 500, and validation messages carry no source paths."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, model_validator
from sglang_mx.guards.http_app import JsonObjectGuard, scrubbed_validation_handler


class Chat(BaseModel):
    messages: list[dict]
    priority: int | None = None
    response_format: dict | list | None = None

    @model_validator(mode="before")
    @classmethod
    def fragile(cls, values):  # what SGLang's set_json_schema does with the raw body
        rf = values.get("response_format")
        if rf:
            rf.get("type")
        return values


def _app() -> FastAPI:
    app = FastAPI()

    async def default_handler(request, exc):
        raise AssertionError("replaced")

    app.exception_handlers[RequestValidationError] = scrubbed_validation_handler(default_handler)

    @app.post("/v1/chat/completions")
    async def chat(req: Chat) -> dict:
        if req.messages and req.messages[0].get("content") == "boom":
            raise RuntimeError("a bug after parsing")
        return {"n": len(req.messages), "priority": req.priority}

    @app.post("/other")
    async def other(request: Request) -> dict:
        return {"len": len(await request.json())}

    app.add_middleware(JsonObjectGuard)
    return app


async def _post(path: str, content: bytes) -> httpx.Response:
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        headers = {"content-type": "application/json"}
        return await client.post(path, content=content, headers=headers)


def post(path: str, content: bytes) -> httpx.Response:
    return asyncio.run(_post(path, content))


@pytest.mark.parametrize("body", [b'"abc"', b"  [1, 2]", b"5", b"\n null", b"1e999"])
def test_non_object_body_is_400(body):
    r = post("/v1/chat/completions", body)
    assert r.status_code == 400
    assert r.json() == {"object": "error", "message": "request body must be a JSON object",
                        "type": "BadRequestError", "param": "body", "code": 400}  # fmt: skip


def test_object_body_reaches_route_intact():
    body = {"messages": [{"role": "user", "content": "x" * 70_000}], "priority": 3}
    r = post("/v1/chat/completions", b"   " + json.dumps(body).encode())
    assert r.status_code == 200 and r.json() == {"n": 1, "priority": 3}


def test_unguarded_route_untouched():
    assert post("/other", b"[1, 2, 3]").json() == {"len": 3}


def test_crash_while_parsing_is_400_crash_in_route_is_500():
    bad = {"messages": [], "response_format": [None, 1.5]}
    r = post("/v1/chat/completions", json.dumps(bad).encode())
    assert r.status_code == 400, r.text
    assert "AttributeError while reading it" in r.json()["message"]
    r = post("/v1/chat/completions", json.dumps({"messages": [{"content": "boom"}]}).encode())
    assert r.status_code == 500


def test_validation_message_names_fields_without_paths():
    r = post("/v1/chat/completions", json.dumps({"messages": 5, "priority": "x"}).encode())
    assert r.status_code == 400
    msg = r.json()["message"]
    assert msg.startswith("invalid request: ") and "messages:" in msg and "priority:" in msg
    assert 'File "' not in msg and ".py" not in msg, msg
