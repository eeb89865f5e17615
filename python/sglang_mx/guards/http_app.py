"""Guards on SGLang's HTTP app, before its routes parse a body.

- `JsonObjectGuard` (ASGI middleware): the generation routes take a JSON object; SGLang 0.5.23
  answers a JSON string or number sent to /v1/chat/completions with a 500 (its request model's
  `before` validator calls `.get` on it). A body whose first non-blank byte is not `{` gets a
  400 here instead. Only the first bytes are looked at, so it costs nothing per request.
- The same middleware answers 400, not 500, when parsing the body into SGLang's request model
  raises something other than a validation error: 0.5.23's `mode="before"` validators call
  `.get` on whatever the client sent (`response_format: [..]` on /v1/chat/completions is an
  AttributeError). Only exceptions raised inside FastAPI's body parsing, before any response
  started, are turned into a 400; anything later is left to SGLang.
- `validation_error_response`: FastAPI's `str(RequestValidationError)` carries the endpoint's
  source file and line, which SGLang's handler sends to the client; ours lists the failing
  fields and messages only.

`guards.hooks.install_http_guards` installs both on SGLang's app.
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

        started = False

        async def send_tracked(message: dict) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, replay, send_tracked)
        except Exception as e:
            if started or not raised_while_parsing(e):
                raise
            msg = f"invalid request body: {type(e).__name__} while reading it: {str(e)[:200]}"
            await _send_json(send, 400, error_json(400, msg, "body"))


_PARSE_FRAMES = frozenset({"solve_dependencies", "request_body_to_args"})


def raised_while_parsing(exc: BaseException) -> bool:
    """True if the exception passed through FastAPI's request-body parsing."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in _PARSE_FRAMES and "fastapi" in code.co_filename:
            return True
        tb = tb.tb_next
    return False


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
    from starlette.responses import Response

    async def handler(request: Any, exc: Any) -> Any:
        path = request.url.path
        if path.startswith(("/v1/messages", "/v1/systemone")):
            return await original(request, exc)  # their own scrubbed formats
        body = error_json(400, describe_validation_errors(exc.errors()))
        if path.startswith("/v1/responses"):
            body = b'{"error":' + body + b"}"
        return Response(body, status_code=400, media_type="application/json")

    return handler
