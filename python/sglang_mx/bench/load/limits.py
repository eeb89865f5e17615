"""What a server accepts, read before a run (context length, vocabulary), and the check that a
workload fits it, so a run that cannot succeed is refused in one line before it starts.

Sources, all optional (the smallest context any of them states wins):
- SGLang with the sglang_mx plugin, and our provider's native route: `/model_info` or
  `/get_model_info` report `context_length` and `vocab_size`;
- SGLang and vLLM: `/v1/models` entries carry `max_model_len`;
- our provider (OpenRouter style): `/v1/models` entries carry `context_length` (legacy format)
  or `input_modalities[].supported_inputs.max_context_length.value` (schema 2.4).
SGLang 0.5.23 refuses prompt + max_tokens above `context_length`, and its scheduler refuses a
prompt of `context_length - 6` tokens or more (max_req_input_len = context - 1 - 5), whatever
the route; so a request fits when prompt <= context - 7 and prompt + output <= context."""

from __future__ import annotations

from dataclasses import dataclass

# Tokens of the context SGLang's scheduler keeps back from a prompt (tp_worker: max_req_len - 5,
# max_req_len = context - 1; a prompt must be shorter than that).
PROMPT_RESERVE = 6
# Flags of `sglang-mx bench gen|run|sweep` that change request lengths.
SCALE_FLAGS = "--input-len / --output-len (or --fit-context)"


class BenchError(Exception):
    """A run that cannot start or go on; the CLI prints its message as one line."""


class WorkloadDoesNotFit(BenchError):
    pass


@dataclass(frozen=True)
class ServerLimits:
    context_length: int | None = None
    vocab_size: int | None = None
    context_source: str = ""  # which endpoint and field the context length came from

    def to_dict(self) -> dict:
        return {
            "context_length": self.context_length,
            "vocab_size": self.vocab_size,
            "context_source": self.context_source,
        }


def _positive(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _entry_contexts(entry: dict) -> list[tuple[int, str]]:
    found = []
    for key in ("max_model_len", "context_length"):
        if n := _positive(entry.get(key)):
            found.append((n, f"/v1/models {key}"))
    for modality in entry.get("input_modalities") or []:
        if isinstance(modality, dict):
            limit = (modality.get("supported_inputs") or {}).get("max_context_length") or {}
            if isinstance(limit, dict) and (n := _positive(limit.get("value"))):
                found.append((n, "/v1/models max_context_length"))
    return found


def limits_from(info: dict | None, models: dict | None, model: str | None = None) -> ServerLimits:
    """Combine a /model_info answer and a /v1/models answer (either may be None)."""
    found: list[tuple[int, str]] = []
    vocab = None
    if isinstance(info, dict):
        vocab = _positive(info.get("vocab_size"))
        if n := _positive(info.get("context_length")):
            found.append((n, "model_info context_length"))
    entries = [e for e in (models or {}).get("data") or [] if isinstance(e, dict)]
    if model is not None and any(e.get("id") == model for e in entries):
        entries = [e for e in entries if e.get("id") == model]
    for entry in entries:
        found += _entry_contexts(entry)
    if not found:
        return ServerLimits(None, vocab, "")
    n, source = min(found)
    return ServerLimits(n, vocab, source)


async def _json(client, url: str) -> dict | None:
    try:
        resp = await client.get(url)
    except Exception:
        return None
    if resp.status_code >= 300:
        return None
    try:
        body = resp.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def read_limits(client, base_url: str, model: str | None = None) -> ServerLimits:
    """The server's limits through an httpx.AsyncClient; fields it does not state stay None."""
    info = await _json(client, f"{base_url}/model_info")
    if info is None or "context_length" not in info:
        # SGLang 0.5.23 routes /model_info to the function itself; the plugin's additions show
        # through /get_model_info, which looks the function up at request time
        info = await _json(client, f"{base_url}/get_model_info") or info
    models = await _json(client, f"{base_url}/v1/models")
    limits = limits_from(info, models, model)
    if limits.context_length is None and models is not None:
        # our provider lists the flat legacy document on request
        legacy = await _json(client, f"{base_url}/v1/models?format=legacy")
        limits = limits_from(info, legacy, model)
    return limits


def fetch_limits(
    base_url: str, api_key: str | None = None, timeout_s: float = 30.0
) -> ServerLimits:
    """Synchronous read_limits; an unreachable server is a BenchError."""
    import asyncio

    import httpx

    async def go() -> ServerLimits:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as client:
            try:
                await client.get(f"{base_url}/v1/models")
            except httpx.HTTPError as exc:
                raise BenchError(f"cannot reach {base_url}: {type(exc).__name__}: {exc}") from None
            return await read_limits(client, base_url)

    return asyncio.run(go())


def longest_request(trace) -> tuple[int, int]:
    """(prompt, output) tokens of the request (priming ones included) needing the most context."""
    rows = [(r.input_len, r.output_len) for r in trace.requests]
    rows += [(n, 1) for _, n in trace.prime]
    return max(rows, key=lambda x: (x[0] + x[1], x[0]))


def check_fits(trace, limits: ServerLimits, max_token_id: int | None = None) -> None:
    """Raise WorkloadDoesNotFit (one line naming both numbers and the flags) unless every request
    of the trace fits the server's context (see the module docstring) and every token id sent is
    inside its vocabulary."""
    ctx = limits.context_length
    if not fits(trace, ctx):
        n_in, n_out = longest_request(trace)
        raise WorkloadDoesNotFit(
            f"workload {trace.spec.name!r} does not fit the server: its longest request is "
            f"{n_in} prompt + {n_out} output = {n_in + n_out} tokens, the server's context is "
            f"{ctx} tokens ({limits.context_source}; prompts up to {ctx - PROMPT_RESERVE - 1}); "
            f"scale it with {SCALE_FLAGS}"
        )
    vocab = limits.vocab_size
    if vocab is not None and max_token_id is not None and max_token_id >= vocab:
        raise WorkloadDoesNotFit(
            f"the prompts use token id {max_token_id} but the server's vocabulary has {vocab} "
            "tokens: pass the served model's tokenizer (--tokenizer MODEL_DIR) or --send-text"
        )


def fits(trace, context_length: int | None) -> bool:
    if context_length is None:
        return True
    n_in, n_out = longest_request(trace)
    return n_in < context_length - PROMPT_RESERVE and n_in + n_out <= context_length


def fit_to_context(spec, context_length: int):
    """`spec` with input and output lengths scaled by one factor (their ratio, hit rate, load and
    seed kept) so its generated trace fits `context_length`; unchanged if it already fits."""
    from sglang_mx.measure.tracegen import generate

    trace = generate(spec)
    if fits(trace, context_length):
        return spec
    n_in, n_out = longest_request(trace)
    factor = min((context_length - PROMPT_RESERVE - 1) / n_in, context_length / (n_in + n_out))
    for _ in range(50):
        scaled = spec.with_overrides(
            name=f"{spec.name}@ctx{context_length}",
            input_len=spec.input_len.scaled(factor),
            output_len=spec.output_len.scaled(factor),
        )
        if fits(generate(scaled), context_length):
            return scaled
        factor *= 0.97
    raise WorkloadDoesNotFit(
        f"workload {spec.name!r} cannot be scaled into a {context_length}-token context; "
        f"set {SCALE_FLAGS} by hand"
    )
