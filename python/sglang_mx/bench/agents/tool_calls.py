"""Agent loop over OpenAI tool calls: the model is offered tools, answers with a `tool_calls`
entry, gets the tool's result back as a `tool` message and answers; the next task joins the same
conversation, so every call re-sends the transcript so far (the shared prefix).

Unlike the frontend-language programs this one speaks the OpenAI chat route, as agent SDKs do:
it needs the server started with GLM's parsers (`--tool-call-parser glm47 --reasoning-parser
glm45`); a turn that was offered tools and came back without a parsed call is counted, and a run
in which no call was parsed fails with that reason.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                       "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search_files", "description": "Search the repository",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                        "limit": {"type": "integer"}},
                       "required": ["query"]}}},
]  # fmt: skip
TASKS = ("Get the weather in {city}.", "Search the files for {topic}.")
CITIES = ("Paris", "Oslo", "Lima", "Seoul")
TOPICS = ("json parser", "retry policy", "unicode error", "tokenizer")


def run_tool_result(name: str, arguments: dict) -> str:
    """The tools' canned answers (the loop measures serving, not tools)."""
    if name == "get_weather":
        return json.dumps({"location": arguments.get("location"), "temperature": 21})
    return json.dumps({"matches": 3, "query": arguments.get("query")})


def _session(base_url: str, headers: dict, model: str, session: int, tasks: int,
             max_tokens: int) -> dict:  # fmt: skip
    messages: list[dict] = []
    calls = prompt = cached = completion = untooled = 0
    cost = 0.0
    costed = True
    with httpx.Client(base_url=base_url, headers=headers, timeout=300) as client:

        def send() -> dict:
            nonlocal calls, prompt, cached, completion, cost, costed
            r = client.post("/v1/chat/completions", json={
                "model": model, "messages": messages, "tools": TOOLS, "temperature": 0,
                "max_tokens": max_tokens})  # fmt: skip
            if r.status_code != 200:
                raise RuntimeError(f"chat completion failed: HTTP {r.status_code} {r.text[:300]}")
            out = r.json()
            usage = out.get("usage") or {}
            calls += 1
            prompt += usage.get("prompt_tokens", 0)
            completion += usage.get("completion_tokens", 0)
            cached += (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            if usage.get("cost") is None:
                costed = False
            else:
                cost += usage["cost"]
            return out["choices"][0]["message"]

        for t in range(tasks):
            task = TASKS[(session + t) % len(TASKS)]
            ask = task.format(city=CITIES[(session + t) % len(CITIES)],
                              topic=TOPICS[(session + t) % len(TOPICS)])  # fmt: skip
            messages.append({"role": "user", "content": ask})
            msg = send()
            tool_calls = msg.get("tool_calls") or []
            if not tool_calls:
                untooled += 1
                messages.append({"role": "assistant", "content": msg.get("content") or ""})
                continue
            messages.append({"role": "assistant", "content": msg.get("content"),
                             "tool_calls": tool_calls})  # fmt: skip
            for call in tool_calls:
                try:
                    args = json.loads(call["function"]["arguments"] or "{}")
                except ValueError:
                    args = {}
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": run_tool_result(call["function"]["name"], args),
                    }
                )
            answer = send()
            messages.append({"role": "assistant", "content": answer.get("content") or ""})
    return {"calls": calls, "prompt_tokens": prompt, "cached_tokens": cached,
            "completion_tokens": completion, "tool_calls": tasks - untooled,
            "untooled_turns": untooled, "cost": cost if costed else None}  # fmt: skip


def run(base_url: str, api_key: str | None, sessions: int, max_tokens: int, tasks: int = 2) -> dict:
    """`sessions` concurrent conversations of `tasks` tool tasks each; the same row as the DSL
    programs' (calls, prompt and cached tokens, cached ratio, cost), plus the tool calls parsed."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    model = httpx.get(base_url + "/v1/models", headers=headers, timeout=30).json()["data"][0]["id"]
    start = time.perf_counter()
    with ThreadPoolExecutor(sessions) as pool:
        rows = list(pool.map(lambda s: _session(base_url, headers, model, s, tasks, max_tokens),
                             range(sessions)))  # fmt: skip
    wall = time.perf_counter() - start
    total = {k: sum(r[k] for r in rows) for k in ("calls", "prompt_tokens", "cached_tokens",
                                                  "completion_tokens", "tool_calls",
                                                  "untooled_turns")}  # fmt: skip
    if total["tool_calls"] == 0:
        raise RuntimeError(
            "no tool call was parsed in any turn: start the server with "
            "--tool-call-parser glm47 --reasoning-parser glm45"
        )
    costs = [r["cost"] for r in rows]
    cost = None if any(c is None for c in costs) else sum(costs)
    return {
        "program": "tool_calls",
        "sessions": sessions,
        **total,
        "cached_ratio": total["cached_tokens"] / max(1, total["prompt_tokens"]),
        "cost_usd": cost,
        "cost_usd_per_run": None if cost is None else cost / sessions,
        "wall_s": wall,
    }
