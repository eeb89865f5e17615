"""Errors in the OpenRouter shape `{"error": {"code", "message", "metadata"}}` (metadata holds
our `reason` and OpenRouter's `error_type`), as JSON or SSE."""

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


# OpenRouter's canonical `error_type` (its SDKs' APIErrorType) by HTTP status, and by reason
# where a reason is more precise than its status. Its SDKs require `error_type` whenever an
# in-band stream error carries metadata.
_ERROR_TYPES = {
    400: "invalid_request", 401: "authentication", 402: "payment_required",
    403: "permission_denied", 404: "not_found", 405: "invalid_request", 408: "timeout",
    413: "payload_too_large", 422: "unprocessable", 429: "rate_limit_exceeded", 500: "server",
    502: "provider_unavailable", 503: "provider_unavailable",
}  # fmt: skip
_REASON_TYPES = {
    "context_length_exceeded": "context_length_exceeded",
    "max_tokens_exceeded": "max_tokens_exceeded",
    "invalid_prompt": "invalid_prompt",
    "upstream_timeout": "timeout",
    "upstream_overloaded": "provider_overloaded",
}


def error_type(code: int, reason: str | None = None) -> str:
    """OpenRouter's canonical error type for a status (and our reason, where finer)."""
    if reason in _REASON_TYPES:
        return _REASON_TYPES[reason]
    return _ERROR_TYPES.get(code, "server" if code >= 500 else "invalid_request")


def error_body(code: int, message: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = dict(metadata or {})
    meta.setdefault("error_type", error_type(code, meta.get("reason")))
    return {"error": {"code": code, "message": message, "metadata": meta}}


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
        "error": error_body(code, message, {"reason": reason})["error"],
        "choices": [choice],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def bad_request(message: str, reason: str = "invalid_request") -> ProviderError:
    return ProviderError(400, message, reason)


def unauthorized(message: str, reason: str = "invalid_key") -> ProviderError:
    return ProviderError(401, message, reason)


def upstream_unavailable(message: str, status: int = 502) -> ProviderError:
    return ProviderError(status, message, "upstream_unavailable")


class StoreUnavailable(ProviderError):
    """The shared database cannot be reached or failed mid-statement: a 503 wherever it
    surfaces (the provider catches it where a request can go on without the store)."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            503,
            f"the provider's database is unavailable ({detail[:200]}); retry shortly",
            "store_unavailable",
            headers={"Retry-After": "1"},
        )
