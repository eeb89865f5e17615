"""Guards on SGLang's HTTP app, before its routes parse a body.

- `JsonObjectGuard` (ASGI middleware): the generation routes take a JSON object; SGLang 0.5.23
  answers a JSON string or number sent to /v1/chat/completions with a 500 (its request model's
  `before` validator calls `.get` on it). A body whose first non-blank byte is not `{` gets a
  400 here instead. Only the first bytes are looked at, so it costs nothing per request.
- `validation_error_response`: FastAPI's `str(RequestValidationError)` carries the endpoint's
  source file and line, which SGLang's handler sends to the client; ours lists the failing
  fields and messages only.

`patches.guard_http_app` installs both on SGLang's app.
"""

from __future__ import annotations

from typing import Any

import orjson

GUARDED_ROUTES = frozenset(
    {"/generate", "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/encode"}
)
_BLANK = b" \t\r\n"


def error_json(status: int, message: str, param: str | None = None) -> bytes:
    """SGLang's OpenAI-compatible error shape (what its other 400s look like)."""
    return orjson.dumps(
        {
            "object": "error",
            "message": message,
            "type": "BadRequestError",
            "param": param,
            "code": status,
        }
    )


async def _send_json(send: Any, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class JsonObjectGuard:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in ("POST", "PUT")
            or scope["path"] not in GUARDED_ROUTES
        ):
            await self.app(scope, receive, send)
            return
        # Read until the first non-blank byte (usually the first message), then replay.
        held: list[dict] = []
        first = None
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"").lstrip(_BLANK)
            if chunk:
                first = chunk[:1]
                break
            if not message.get("more_body", False):
                break
        if first is not None and first != b"{":
            await _send_json(
                send, 400, error_json(400, "request body must be a JSON object", "body")
            )
            return

        async def replay() -> dict:
            if held:
                return held.pop(0)
            return await receive()

        await self.app(scope, replay, send)


def describe_validation_errors(errors: list[dict]) -> str:
    parts = []
    for err in errors[:10]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return "invalid request: " + "; ".join(parts) + more


def scrubbed_validation_handler(original: Any) -> Any:
    """Wrap SGLang's RequestValidationError handler: same status and shape on its routes, the
    message built from the errors' locations and messages (no source paths)."""
    from fastapi.responses import ORJSONResponse

    async def handler(request: Any, exc: Any) -> Any:
        path = request.url.path
        if path.startswith(("/v1/messages", "/v1/systemone")):
            return await original(request, exc)  # their own scrubbed formats
        message = describe_validation_errors(exc.errors())
        if path.startswith("/v1/responses"):
            content = {"error": orjson.loads(error_json(400, message))}
        else:
            content = orjson.loads(error_json(400, message))
        return ORJSONResponse(status_code=400, content=content)

    return handler
