"""Errors in the OpenRouter shape `{"error": {"code", "message", "metadata"?}}`, as JSON or SSE."""

from __future__ import annotations

import json
from typing import Any


class ProviderError(Exception):
    """A failure with the HTTP status and body the client should see."""

    def __init__(
        self,
        status: int,
        message: str,
        reason: str,
        headers: dict[str, str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason  # machine-readable cause, e.g. "unknown_model"
        self.headers = headers or {}
        self.metadata = metadata or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, {"reason": self.reason, **self.metadata})


def error_body(code: int, message: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if metadata:
        err["metadata"] = metadata
    return {"error": err}


def sse_error_event(
    chunk_id: str,
    model: str,
    created: int,
    code: int,
    message: str,
    reason: str,
    obj: str = "chat.completion.chunk",
) -> bytes:
    """In-band error once a stream has begun: a chunk with `error` and finish_reason "error"."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": "error"}
    choice.update({"delta": {"content": ""}} if obj == "chat.completion.chunk" else {"text": ""})
    payload = {
        "id": chunk_id,
        "object": obj,
        "created": created,
        "model": model,
        "provider": "sglang-mx",
        "error": {"code": code, "message": message, "metadata": {"reason": reason}},
        "choices": [choice],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def bad_request(message: str, reason: str = "invalid_request") -> ProviderError:
    return ProviderError(400, message, reason)


def unauthorized(message: str, reason: str = "invalid_key") -> ProviderError:
    return ProviderError(401, message, reason)


def upstream_unavailable(message: str, status: int = 502) -> ProviderError:
    return ProviderError(status, message, "upstream_unavailable")
