"""Multi-turn agent sessions, replayed (`sglang-mx bench sessions`, issue 45 item 7): the traffic
behind a 60% prefix-hit rate, where each turn's prompt is the previous turn's prompt plus the
answer the server gave plus a tool result, sent only once that answer arrived.

A session trace is JSONL, one session per line (`benchmark/traces/agent-sessions-sample.jsonl`):

    {"session": "s1", "start_s": 0.0, "system": "...",
     "turns": [{"messages": [{"role": "user", "content": "..."}], "max_tokens": 64,
                "think_s": 0.5}, ...]}

Each turn appends its `messages` (user text, or a `tool` result) to the conversation, asks
the endpoint's chat completions (streamed, usage included) for at most `max_tokens`, appends the
assistant's actual answer, waits `think_s`, and goes on. Sessions start at `start_s` and run side
by side; the turns of one session never overlap. A `tool` message after an answer that made no
tool call is sent as a user message saying it is a tool result (an OpenAI `tool` message must
answer a call), and the record says so.

Per turn it records TTFT, end-to-end time, prompt / completion / cached tokens (the server's
`usage.prompt_tokens_details.cached_tokens`; SGLang reports it with `--enable-cache-report`) and
the cached fraction, and the summary gives the cached fraction by turn number.

Public format read: ShareGPT (`conversations` of {from, value}; `human` / `user` turns,
`gpt` / `assistant` answers give the turn's max_tokens by their length, `system`, and the
function-calling variants' `observation` / `tool` / `function_response` as tool results)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from sglang_mx.bench.load.limits import BenchError

TOOL_ROLES = ("observation", "tool", "function_response")
SESSION_FORMATS = ("sessions", "sharegpt")  # --trace-format of `bench sessions`


@dataclass(frozen=True)
class Turn:
    messages: tuple[dict, ...]
    max_tokens: int
    think_s: float = 0.0


@dataclass(frozen=True)
class Session:
    session: str
    turns: tuple[Turn, ...]
    start_s: float = 0.0
    system: str | None = None


@dataclass
class TurnRecord:
    session: str
    turn: int
    sent_at_s: float
    ttft_s: float | None
    e2e_s: float
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    tool_as_user: bool = False
    error: str | None = None
    answer_chars: int = 0

    @property
    def cached_fraction(self) -> float | None:
        if self.cached_tokens is None or not self.prompt_tokens:
            return None
        return self.cached_tokens / self.prompt_tokens


def _turn(raw: dict, where: str) -> Turn:
    msgs = raw.get("messages")
    if not isinstance(msgs, list) or not msgs or not all(
        isinstance(m, dict) and m.get("role") in ("user", "tool") and isinstance(
            m.get("content"), str) for m in msgs
    ):  # fmt: skip
        raise BenchError(f"{where}: messages must be a list of user / tool messages with content")
    n = raw.get("max_tokens")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise BenchError(f"{where}: max_tokens must be an integer >= 1 (got {n!r})")
    think = raw.get("think_s", 0.0)
    if not isinstance(think, (int, float)) or think < 0:
        raise BenchError(f"{where}: think_s must be a number >= 0 (got {think!r})")
    return Turn(tuple(msgs), n, float(think))


def load_sessions(path: str | Path, max_sessions: int | None = None) -> list[Session]:
    """Our session JSONL; every problem is one error naming the line."""
    out = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{i}"
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise BenchError(f"{where}: not JSON ({exc})") from None
        turns = raw.get("turns") if isinstance(raw, dict) else None
        if not isinstance(turns, list) or not turns:
            raise BenchError(f"{where}: a session needs a non-empty list of turns")
        out.append(Session(str(raw.get("session", i)), tuple(
            _turn(t, f"{where} turn {k}") for k, t in enumerate(turns, 1)
        ), float(raw.get("start_s", 0.0)), raw.get("system")))  # fmt: skip
        if max_sessions and len(out) >= max_sessions:
            break
    if not out:
        raise BenchError(f"{path}: no session in the file")
    return out


def load_any(path: str | Path, fmt: str = "auto", max_sessions: int | None = None,
             gap_s: float = 0.0) -> list[Session]:  # fmt: skip
    """Sessions from `path` in `fmt` (SESSION_FORMATS; auto: ShareGPT when the file is one JSON
    list, else our session JSONL); `gap_s` spaces ShareGPT's session starts."""
    if fmt == "auto":
        with open(path) as f:
            fmt = "sharegpt" if f.read(4096).lstrip().startswith("[") else "sessions"
    if fmt == "sharegpt":
        return from_sharegpt(path, max_sessions, gap_s)
    if fmt == "sessions":
        return load_sessions(path, max_sessions)
    raise BenchError(f"--trace-format {fmt}: sessions reads auto, {', '.join(SESSION_FORMATS)}")


def from_sharegpt(path: str | Path, max_sessions: int | None = None, gap_s: float = 0.0,
                  default_max_tokens: int = 128) -> list[Session]:  # fmt: skip
    """Sessions from a ShareGPT JSON file (a list of {id, conversations}); an answer's length in
    characters / 4 stands for its tokens (the turn's max_tokens); `gap_s` between session
    starts."""
    try:
        data = json.loads(Path(path).read_text())
    except ValueError as exc:
        raise BenchError(f"{path}: not JSON ({exc})") from None
    out: list[Session] = []
    for n, conv in enumerate(data if isinstance(data, list) else []):
        system, turns, pending = None, [], []
        for m in conv.get("conversations", []) if isinstance(conv, dict) else []:
            who, text = m.get("from"), m.get("value")
            if not isinstance(text, str):
                continue
            if who == "system":
                system = text
            elif who in ("human", "user"):
                pending.append({"role": "user", "content": text})
            elif who in TOOL_ROLES:
                pending.append({"role": "tool", "content": text})
            elif who in ("gpt", "assistant") and pending:
                turns.append(Turn(tuple(pending), max(1, len(text) // 4)))
                pending = []
        if pending:
            turns.append(Turn(tuple(pending), default_max_tokens))
        if turns:
            sid = str(conv.get("id", n))
            out.append(Session(sid, tuple(turns), len(out) * gap_s, system))
        if max_sessions and len(out) >= max_sessions:
            break
    if not out:
        raise BenchError(f"{path}: no ShareGPT conversation with a user turn")
    return out


@dataclass
class _Conversation:
    messages: list[dict] = field(default_factory=list)
    last_call_id: str | None = None


async def _one_turn(client, url: str, model: str, conv: _Conversation, turn: Turn,
                    extra: dict) -> tuple[dict, str, bool]:  # fmt: skip
    tool_as_user = False
    for m in turn.messages:
        if m["role"] == "tool" and conv.last_call_id:
            conv.messages.append({**m, "tool_call_id": conv.last_call_id})
        elif m["role"] == "tool":
            conv.messages.append({"role": "user", "content": f"Tool result:\n{m['content']}"})
            tool_as_user = True
        else:
            conv.messages.append(dict(m))
    body = {"model": model, "messages": conv.messages, "max_tokens": turn.max_tokens,
            "stream": True, "stream_options": {"include_usage": True}, **extra}  # fmt: skip
    text, calls, usage, ttft = [], [], {}, None
    t0 = time.monotonic()
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            raise BenchError(f"HTTP {r.status_code}: {(await r.aread())[:200]!r}")
        async for line in r.aiter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                piece = delta.get("content") or delta.get("reasoning_content") or ""
                if (piece or delta.get("tool_calls")) and ttft is None:
                    ttft = time.monotonic() - t0
                text.append(delta.get("content") or "")
                calls += delta.get("tool_calls") or []
    answer = {"role": "assistant", "content": "".join(text)}
    ids = [c.get("id") for c in calls if c.get("id")]
    conv.last_call_id = ids[0] if ids else None
    if calls:
        answer["tool_calls"] = calls
    conv.messages.append(answer)
    return (
        {"usage": usage, "ttft": ttft, "e2e": time.monotonic() - t0},
        answer["content"],
        (tool_as_user),
    )


async def _run_session(client, url, model, s: Session, t_start: float, extra: dict,
                       records: list[TurnRecord]) -> None:  # fmt: skip
    await asyncio.sleep(max(0.0, s.start_s - (time.monotonic() - t_start)))
    conv = _Conversation([{"role": "system", "content": s.system}] if s.system else [])
    for k, turn in enumerate(s.turns, 1):
        sent = time.monotonic() - t_start
        try:
            got, answer, as_user = await _one_turn(client, url, model, conv, turn, extra)
        except Exception as exc:  # one failed turn ends its session: later turns build on it
            records.append(
                TurnRecord(
                    s.session,
                    k,
                    sent,
                    None,
                    time.monotonic() - t_start - sent,
                    0,
                    0,
                    None,
                    error=f"{type(exc).__name__}: {exc}"[:300],
                )
            )
            return  # fmt: skip
        u = got["usage"]
        details = u.get("prompt_tokens_details") or {}
        records.append(TurnRecord(
            s.session, k, sent, got["ttft"], got["e2e"], int(u.get("prompt_tokens", 0)),
            int(u.get("completion_tokens", 0)), details.get("cached_tokens"), as_user,
            answer_chars=len(answer),
        ))  # fmt: skip
        await asyncio.sleep(turn.think_s)


def replay(url: str, sessions: list[Session], model: str | None = None,
           api_key: str | None = None, extra: dict | None = None) -> list[TurnRecord]:  # fmt: skip
    """Replay `sessions` against `url` (see the module docstring); the records in send order."""
    import httpx

    async def go() -> list[TurnRecord]:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=max(8, len(sessions)))
        async with httpx.AsyncClient(timeout=600, headers=headers, limits=limits) as client:
            name = model
            if not name:
                try:
                    name = (await client.get(f"{url}/v1/models")).json()["data"][0]["id"]
                except Exception as exc:
                    raise BenchError(f"cannot read a model name from {url}/v1/models "
                                     f"({type(exc).__name__}); pass --model") from None  # fmt: skip
            records: list[TurnRecord] = []
            t0 = time.monotonic()
            await asyncio.gather(
                *(_run_session(client, url, name, s, t0, extra or {}, records) for s in sessions)
            )
            return sorted(records, key=lambda r: r.sent_at_s)

    return asyncio.run(go())


def summary(records: list[TurnRecord]) -> dict:
    """Cached fraction by turn number (mean over sessions), failed turns, TTFT by turn."""
    by_turn: dict[int, list[TurnRecord]] = {}
    for r in records:
        by_turn.setdefault(r.turn, []).append(r)
    rows = []
    for k in sorted(by_turn):
        ok = [r for r in by_turn[k] if r.error is None]
        fr = [r.cached_fraction for r in ok if r.cached_fraction is not None]
        tt = [r.ttft_s for r in ok if r.ttft_s is not None]
        rows.append({
            "turn": k, "sessions": len(by_turn[k]), "failed": len(by_turn[k]) - len(ok),
            "cached_fraction": sum(fr) / len(fr) if fr else None,
            "prompt_tokens": sum(r.prompt_tokens for r in ok) / len(ok) if ok else None,
            "ttft_s": sum(tt) / len(tt) if tt else None,
        })  # fmt: skip
    prompt = sum(r.prompt_tokens for r in records if r.error is None)
    cached = sum(r.cached_tokens or 0 for r in records if r.error is None)
    return {"turns": rows, "failed": sum(r.error is not None for r in records),
            "cached_fraction": cached / prompt if prompt else None}  # fmt: skip
