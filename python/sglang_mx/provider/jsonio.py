"""JSON on the request path: orjson for speed, the stdlib where orjson refuses what clients and
upstreams may legitimately send (NaN literals, integers beyond 64 bits), so behaviour is the
stdlib's."""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(raw: bytes | str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        # Parses NaN/Infinity and huge integers, or raises the stdlib's clearer message.
        return json.loads(raw)


def dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:  # orjson.JSONEncodeError: e.g. an integer beyond 64 bits
        return json.dumps(obj, separators=(",", ":")).encode()
