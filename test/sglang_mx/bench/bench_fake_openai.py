"""A stand-in OpenAI-compatible server for runner tests: streams `max_tokens` chunks and reports
cached tokens as the longest common token prefix with earlier prompts (a radix cache in spirit);
with `metrics` it also serves SGLang-named Prometheus counters and gauges at /metrics."""

from __future__ import annotations

import asyncio
import json
import math

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

# one token per chunk in the tests' tokenizer (a word it was trained on), so the client's
# re-encoded count of the stream equals max_tokens
WORD = " the"


class FakeCache:
    def __init__(self, warm: list[list[int]] | None = None) -> None:
        self.prompts: list[list[int]] = list(warm or [])
        self.flushes = 0

    def lookup_insert(self, ids: list[int]) -> int:
        cached = self.lookup(ids)
        self.prompts.append(ids)
        return cached

    def lookup(self, ids: list[int]) -> int:
        best = 0
        for p in self.prompts:
            n = 0
            for a, b in zip(ids, p, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return min(best, len(ids) - 1)


def make_app(
    cache: FakeCache,
    report_cache: bool = True,
    fail_every: int = 0,
    context_length: int | None = None,
    advertise: bool = True,
    vocab_size: int | None = None,
    metrics: bool = False,
    count_extra_generation: int = 0,
    short_by: int = 0,
    prefill_s: float = 0.0,
    spec_accept: float = 0.0,
    text_only: bool = False,
) -> FastAPI:
    """`context_length`: prompts of that many tokens or more, or prompt + max_tokens above it,
    get SGLang's 400; `advertise` False keeps it out of /v1/models and /get_model_info (a server
    that does not say). `vocab_size` is reported by /get_model_info, as the plugin does.
    `metrics`: serve /metrics (SGLang's names); `count_extra_generation` tokens are added to
    its generation counter per request (a server whose counter disagrees with its usage);
    `short_by` streams that many tokens fewer than max_tokens while usage still claims them
    all. `prefill_s`: a streamed prompt is looked up on arrival but cached only after that
    long, just before its first token, as SGLang's radix cache takes it once its prefill result
    is processed (requests arriving meanwhile miss it). `spec_accept`: a draft accepting that
    many tokens per verify step, counted as SGLang counts it (sglang:spec_verify_calls_total;
    0: no draft, no counter). `text_only`: a prompt of token ids gets the 422 sglang-router
    0.3.2 answers (its OpenAI routes take a prompt as text only)."""
    app = FastAPI()
    count = {"n": 0}
    app.state.completions = count
    totals = {"prompt": 0, "generation": 0, "cached": 0, "requests": 0, "verify": 0}

    def tally(prompt: int, generation: int, cached: int) -> None:
        totals["prompt"] += prompt
        totals["generation"] += generation + count_extra_generation
        totals["cached"] += cached
        totals["requests"] += 1
        if spec_accept:
            totals["verify"] += math.ceil(generation / spec_accept)

    if metrics:

        @app.get("/metrics")
        async def prometheus():
            lab = '{model_name="fake-model",is_streaming="true"}'
            text = (
                "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
                "# TYPE sglang:prompt_tokens_total counter\n"
                f"sglang:prompt_tokens_total{lab} {float(totals['prompt'])}\n"
                f"sglang:generation_tokens_total{lab} {float(totals['generation'])}\n"
                f'sglang:cached_tokens_total{{cache_source="device"}} {float(totals["cached"])}\n'
                f"sglang:num_requests_total{lab} {float(totals['requests'])}\n"
                'sglang:num_queue_reqs{model_name="fake-model"} 0.0\n'
                f'sglang:num_running_reqs{{model_name="fake-model"}} {float(count["n"] % 3)}\n'
                'sglang:token_usage{model_name="fake-model"} 0.25\n'
                'sglang:cache_hit_rate{model_name="fake-model"} 0.5\n'
            )
            if spec_accept:
                verify = float(totals["verify"])
                text += f'sglang:spec_verify_calls_total{{model_name="fake-model"}} {verify}\n'

            return PlainTextResponse(text)

    @app.get("/v1/models")
    async def models():
        entry = {"id": "fake-model"}
        if context_length and advertise:
            entry["max_model_len"] = context_length
        return {"data": [entry]}

    @app.post("/flush_cache")
    async def flush():
        cache.prompts.clear()
        cache.flushes += 1
        return {"ok": True}

    @app.get("/get_model_info")
    async def model_info():
        info = {"model_path": "fake-model", "is_generation": True}
        if vocab_size:
            info["vocab_size"] = vocab_size
        if context_length and advertise:
            info["context_length"] = context_length
        return info

    @app.post("/generate")
    async def generate(req: Request):
        # native SGLang API as the frontend DSL uses it; one "token" per byte here
        body = await req.json()
        ids = list(body["text"].encode())
        n_out = body["sampling_params"].get("max_new_tokens", 16)
        cached = cache.lookup_insert(ids)
        meta = {"prompt_tokens": len(ids), "cached_tokens": cached, "completion_tokens": n_out}
        return {"text": " y" * n_out, "meta_info": meta}

    @app.post("/v1/completions")
    async def completions(req: Request):
        body = await req.json()
        count["n"] += 1
        if fail_every and count["n"] % fail_every == 0:
            return JSONResponse({"error": {"code": 503, "message": "overloaded"}}, 503)
        ids = body["prompt"]
        if text_only and isinstance(ids, list):
            message = (
                "Failed to deserialize the JSON body into the target type: prompt: data did not "
                "match any variant of untagged enum StringOrArray at line 1 column 93"
            )
            return JSONResponse({"error": {"message": message, "code": 422}}, 422)
        if context_length and (
            len(ids) >= context_length or len(ids) + body["max_tokens"] > context_length
        ):
            message = (
                f"The input ({len(ids)} tokens) is longer than the model's context length "
                f"({context_length} tokens)."
            )
            error = {"object": "error", "message": message, "type": "BadRequestError"}
            return JSONResponse({**error, "param": None, "code": 400}, 400)
        late = prefill_s > 0 and body.get("stream")
        cached = cache.lookup(ids) if late else cache.lookup_insert(ids)
        usage = {
            "prompt_tokens": len(ids),
            "completion_tokens": body["max_tokens"],
            "total_tokens": len(ids) + body["max_tokens"],
        }
        if report_cache:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        tally(len(ids), body["max_tokens"], cached)
        if not body.get("stream"):
            return {"choices": [{"text": "x"}], "usage": usage}

        async def events():
            yield ": PROCESSING\n\n"
            if late:
                await asyncio.sleep(prefill_s)
                cache.prompts.append(ids)
            for _ in range(body["max_tokens"] - short_by):
                await asyncio.sleep(0.002)
                yield f"data: {json.dumps({'choices': [{'text': WORD}]})}\n\n"
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app
