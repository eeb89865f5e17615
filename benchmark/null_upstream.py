"""A null upstream for the provider benchmark: a keep-alive HTTP/1.1 server that answers every
POST with the same 1-token completion (usage with cached tokens included), as an SSE stream of
SGLang's shape when the body asks for `"stream": true`, and GET /v1/models with one model. No
model, no tokenizer: against it, the provider's added latency is its own work, without an
inference server contending for the cores. Not SGLang; named as such in every
result it produces.

With `--stream-max-tokens` a streamed answer has as many tokens as the body's `max_tokens` (one
SSE event each, usage at the end), so a load generator's own ceiling can be measured against it
(`sglang-mx bench calibrate`). `--ttft-s S` and `--itl-s S` pace it: the first token after S
seconds, each next one S after the last, whatever the load (a server whose true TTFT and ITL are
known, so two clients' measurements of them can be held to a tight bound:
sglang_mx_lab/peer.py).

    python benchmark/null_upstream.py PORT [--stream-max-tokens] [--ttft-s S] [--itl-s S]"""

from __future__ import annotations

import asyncio
import json
import sys

from sglang_mx_lab.testing.rawhttp import read_request

MODEL = "null-upstream"
_COMPLETION = json.dumps(
    {
        "id": "null",
        "object": "text_completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "text": " a", "finish_reason": "length", "logprobs": None}],
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 1,
            "total_tokens": 6,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
    }
).encode()
_MODELS = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()


def _response(body: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


COMPLETION, MODELS = _response(_COMPLETION), _response(_MODELS)


def _event(payload: dict) -> bytes:
    data = b"data: " + json.dumps(payload).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


_CHUNK = {"id": "null", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
_USAGE = json.loads(_COMPLETION)["usage"]
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
STREAM_EVENTS = [  # role, one token (with continuous usage), finish, [DONE]
    _event(_CHUNK | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    _event(_CHUNK | {"choices": [{"index": 0, "delta": {"content": " a"}}], "usage": _USAGE}),
    _event(
        _CHUNK
        | {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": _USAGE}
    ),
    b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n",
]


_TOKEN = _event(_CHUNK | {"choices": [{"index": 0, "text": " a", "delta": {"content": " a"}}]})


async def _stream_n(writer: asyncio.StreamWriter, body: bytes) -> None:
    """max_tokens tokens, one event each, then usage (prompt length from the body's ids) when
    the body asks for it (`stream_options.include_usage`), as OpenAI and SGLang do: a client
    that does not ask, such as SGLang's own benchmark, reads every event's choices[0]."""
    req = json.loads(body)
    n = max(1, int(req.get("max_tokens") or 1))
    prompt = req.get("prompt")
    n_in = len(prompt) if isinstance(prompt, list) else 1
    usage = {"prompt_tokens": n_in, "completion_tokens": n, "total_tokens": n_in + n}
    writer.write(STREAM_HEAD)
    await writer.drain()
    for i in range(n):
        await asyncio.sleep(TTFT_S if i == 0 else ITL_S)
        writer.write(_TOKEN)
        await writer.drain()
    if (req.get("stream_options") or {}).get("include_usage"):
        writer.write(_event(_CHUNK | {"choices": [], "usage": usage}))
    writer.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head, body = await read_request(reader)
            streamed = b'"stream":true' in body.replace(b" ", b"")
            if head.startswith(b"GET /v1/models"):
                writer.write(MODELS)
            elif streamed and STREAM_MAX_TOKENS:
                await _stream_n(writer, body)
            elif streamed:
                writer.write(STREAM_HEAD)
                for event in STREAM_EVENTS:  # one write per event, as a token-by-token server
                    writer.write(event)
                    await writer.drain()
                    await asyncio.sleep(0)
            else:
                writer.write(COMPLETION)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


STREAM_MAX_TOKENS = False
TTFT_S = ITL_S = 0.0


def _flag(name: str) -> float:
    args = sys.argv[2:]
    return float(args[args.index(name) + 1]) if name in args else 0.0


if __name__ == "__main__":
    STREAM_MAX_TOKENS = "--stream-max-tokens" in sys.argv[2:]
    TTFT_S, ITL_S = _flag("--ttft-s"), _flag("--itl-s")
    asyncio.run(main(int(sys.argv[1])))
