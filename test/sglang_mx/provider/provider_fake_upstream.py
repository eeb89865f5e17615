"""A scripted stand-in for an SGLang server, for the few failure modes a real server cannot be
made to produce on demand (upstream 5xx, malformed events, a stream cut mid-way), and for quick
client-schema tests: a scripted tool call (TOOLCALL in the messages; answered in text once a
`tool` message follows) and a reasoning block when `enable_thinking` is true, in SGLang's
shapes (`reasoning_content`, `completion_tokens_details.reasoning_tokens`). Every chat body it
received is kept in `app.state.bodies` (`GET /bodies`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import JSONResponse, Response, StreamingResponse


def build_fake_upstream() -> FastAPI:
    app = FastAPI()
    app.state.aborted = []
    app.state.bodies = []

    @app.get("/health")
    async def health() -> dict:
        return {}

    @app.get("/get_model_info")
    async def model_info() -> dict:
        return {"model_path": "tiny", "is_generation": True}

    @app.get("/get_server_info")
    async def server_info() -> dict:
        return {"model_path": "tiny"}

    @app.post("/generate")
    async def generate() -> dict:
        return {"text": "x", "meta_info": {"completion_tokens": 1}}

    @app.post("/abort_request")
    async def abort(request: Request) -> Response:
        app.state.aborted.append((await request.json()).get("rid"))
        return Response(status_code=200)

    @app.get("/aborted")
    async def aborted() -> dict:
        return {"rids": app.state.aborted}

    @app.get("/bodies")
    async def bodies() -> dict:
        return {"bodies": app.state.bodies}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        app.state.bodies.append(body)
        text = json.dumps(body["messages"])
        n = body.get("max_tokens", 4)
        usage = {
            "prompt_tokens": 7,
            "completion_tokens": n,
            "total_tokens": 7 + n,
            "prompt_tokens_details": {"cached_tokens": 3},
        }
        thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking") is True
        if thinking:
            usage["completion_tokens_details"] = {"reasoning_tokens": 2}
        calls_tool = "TOOLCALL" in text and body["messages"][-1].get("role") != "tool"
        if calls_tool:
            call = {
                "id": "call_0",
                "index": 0,
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
            }
        if "HTTP500" in text:
            return JSONResponse({"message": "boom"}, status_code=500)
        if "LATE503" in text:
            await asyncio.sleep(1.0)  # refuses only after the provider started its SSE reply
            return JSONResponse({"message": "busy"}, status_code=503)
        if "DUPRID" in text:  # what SGLang answers a rid it still holds (a gateway's retry)
            msg = f"Duplicate request ID detected: {body.get('rid')}"
            return JSONResponse({"object": "error", "message": msg, "type": "BadRequestError",
                                 "param": None, "code": 400}, status_code=400)  # fmt: skip
        if "HTTP503" in text:
            return JSONResponse({"message": "busy"}, status_code=503)
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": "t" * n}
            if thinking:
                message["reasoning_content"] = "I think."
            if calls_tool:
                message.update(content=None, tool_calls=[call])
            return JSONResponse(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body["model"],
                    "usage": usage,
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": "tool_calls" if calls_tool else "length",
                        }
                    ],
                }
            )

        def chunk(i: int, content: str) -> dict:
            return {
                "id": "x",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
                "usage": dict(usage, completion_tokens=i + 1),
            }

        if "ONEREAD" in text:  # every event in one write, CRLF line endings, non-ASCII text
            lines = [f"data: {json.dumps(chunk(i, 'é'), ensure_ascii=False)}" for i in range(n)]
            raw = "\r\n\r\n".join([*lines, "data: [DONE]"]) + "\r\n\r\n"

            async def one_read():
                yield raw.encode()

            return StreamingResponse(one_read(), media_type="text/event-stream")

        async def events():
            if thinking:
                think = chunk(0, "")
                think["choices"][0]["delta"] = {"reasoning_content": "I think."}
                yield f"data: {json.dumps(think)}\n\n".encode()
            if calls_tool:  # the call in two deltas, SGLang's way: name, then the arguments
                first, rest = dict(call, function={"name": "get_weather", "arguments": ""}), {
                    "index": 0, "function": {"arguments": call["function"]["arguments"]}
                }  # fmt: skip
                for i, tc in enumerate((first, rest)):
                    c = chunk(i, "")
                    c["choices"][0]["delta"] = {"tool_calls": [tc]}
                    yield f"data: {json.dumps(c)}\n\n".encode()
                end = chunk(1, "")
                end["choices"][0].update(delta={}, finish_reason="tool_calls")
                yield f"data: {json.dumps(end)}\n\n".encode()
                yield b"data: [DONE]\n\n"
                return
            for i in range(n):
                if "SLOW" in text:
                    await asyncio.sleep(0.5)
                if "CUT" in text and i == 2:
                    raise RuntimeError("cut the stream")  # uvicorn drops the connection
                if "BADJSON" in text and i == 2:
                    yield b"data: {not json\n\n"
                yield f"data: {json.dumps(chunk(i, 't'))}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


@contextlib.contextmanager
def provider_on_fake(tmp: Path, **settings: Any) -> Iterator[dict[str, Any]]:
    """The provider in this process, `settings` (ProviderSettings fields) over its defaults,
    in front of the scripted upstream: {"url", "upstream", "db", "key", "pricing"}."""
    from provider_support import serve_in_thread, write_pricing
    from sglang_mx.provider.app import build_app
    from sglang_mx.provider.keys import KeyStore
    from sglang_mx.provider.settings import ProviderSettings

    pricing = write_pricing(tmp / "pricing.json", "tiny")
    db = tmp / "db.sqlite"
    _, key = KeyStore(db).create("t")
    with serve_in_thread(build_fake_upstream()) as up:
        with serve_in_thread(build_app(ProviderSettings(up, pricing, db, **settings))) as url:
            yield {"url": url, "upstream": up, "db": db, "key": key, "pricing": pricing}
