"""Synthetic agent chats in the bundled GLM-5 chat template, for `train_tiny_glm5_agent.py`.

Each example is (prompt text, target text): the prompt is what SGLang renders with the model's
chat template (tools, history, generation prompt), the target is the assistant's turn in GLM-4.7's
syntax, which SGLang's `glm47` tool-call and `glm45` reasoning parsers read:

    <think>reasoning</think><tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>

Four kinds, all procedurally generated from a seed (no text is copied from anywhere):

- `call`: tools offered, thinking on (the default with tools: the prompt ends `<think>`);
- `call_no_think`: tools offered, `enable_thinking` false (the prompt ends `<think></think>`);
- `answer`: a call, its `tool` result back, then a text answer (the agent loop's second turn);
- `think`: no tools, `enable_thinking` true: reasoning, then code continuing the user's code.

The tool a request asks for is named by its verb and noun in the user's words (`get_weather`:
"get the weather ..."), among decoys; argument values are copied from the request. Right in form,
not wise (issue 44).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

VERBS = (
    "get", "search", "read", "create", "delete", "list", "update", "send", "find", "count",
    "check", "open", "run", "cancel", "book", "fetch", "close", "add",
)  # fmt: skip
NOUNS = (
    "weather", "file", "user", "order", "ticket", "page", "issue", "email", "price", "stock",
    "flight", "repo", "test", "log", "note", "song", "book", "event", "invoice", "task", "hotel",
    "forecast", "time", "news", "report",
)  # fmt: skip
CITIES = (
    "Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Oslo", "Lima", "Cairo", "Delhi",
    "Seoul", "Sydney", "Boston", "Denver", "San Francisco", "New York", "Boston, MA",
    "San Francisco, CA", "Austin, TX", "Toronto", "Zurich", "Nairobi", "Lagos", "Hanoi",
)  # fmt: skip
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy")
PATHS = ("src/main.py", "README.md", "lib/os.py", "docs/index.md", "setup.cfg", "app/cli.py",
         "tests/test_io.py", "data/config.json")  # fmt: skip
TOPICS = ("json parser", "retry policy", "async timeout", "unicode error", "rust", "tokenizer",
          "cache misses", "the budget", "python 3.11", "gpu kernels", "mxfp4")  # fmt: skip
UNITS = ("celsius", "fahrenheit", "metric", "imperial")

# (key, JSON type, values, how a request says it)
PARAMS = (
    ("location", "string", CITIES, ("in {v}", "for {v}")),
    ("city", "string", CITIES, ("in {v}", "for {v}")),
    ("path", "string", PATHS, ("at {v}", "{v}")),
    ("query", "string", TOPICS, ('about "{v}"', "for {v}")),
    ("name", "string", NAMES, ("named {v}", "called {v}")),
    ("user", "string", NAMES, ("for user {v}", "of {v}")),
    ("id", "integer", None, ("number {v}", "#{v}", "with id {v}")),
    ("limit", "integer", None, ("limit {v}", "top {v}")),
    ("count", "integer", None, ("x{v}", "count {v}")),
    ("date", "string", ("2026-12-05", "2027-01-31", "today", "tomorrow"), ("on {v}",)),
    ("unit", "string", UNITS, ("in {v} units", "using {v}")),
    ("priority", "integer", None, ("priority {v}",)),
    ("tag", "string", ("urgent", "bug", "docs", "later", "infra"), ("tagged {v}",)),
    ("email", "string", tuple(f"{n}@example.com" for n in NAMES), ("to {v}",)),
    ("title", "string", TOPICS, ('titled "{v}"',)),
)
ASK = ("{verb} the {noun} {args}", "Please {verb} the {noun} {args}.",
       "Can you {verb} the {noun} {args}?", "I need you to {verb} the {noun} {args}.",
       "{verb} {noun} {args}")  # fmt: skip
RESULTS = ('{{"status": "ok", "value": {n}}}', "{n} results", '{{"temperature": {n}}}', "done",
           '{{"id": {n}, "state": "open"}}', "no match")  # fmt: skip


@dataclass(frozen=True)
class Tool:
    name: str
    verb: str
    noun: str
    params: tuple  # entries of PARAMS

    def schema(self) -> dict:
        props = {p[0]: {"type": p[1]} for p in self.params}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": f"{self.verb.capitalize()} a {self.noun}.",
                "parameters": {"type": "object", "properties": props, "required": list(props)},
            },
        }


def _tool(rng: random.Random, taken: set[str]) -> Tool:
    while True:
        verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
        name = f"{verb}_{noun}"
        if name not in taken:
            taken.add(name)
            return Tool(name, verb, noun, tuple(rng.sample(PARAMS, rng.randint(1, 3))))


def _value(rng: random.Random, param) -> str | int:
    _, kind, values, _ = param
    if values is None:
        return rng.randint(1, 999) if kind == "integer" else rng.choice(TOPICS)
    return rng.choice(values)


def _call(rng: random.Random, tools: list[Tool]):
    """(user request, the chosen tool, its arguments)."""
    tool = rng.choice(tools)
    args = {p[0]: _value(rng, p) for p in tool.params}
    said = " ".join(rng.choice(p[3]).format(v=args[p[0]]) for p in tool.params)
    ask = rng.choice(ASK).format(verb=tool.verb, noun=tool.noun, name=tool.name, args=said)
    ask = ask.strip()
    return ask[0].upper() + ask[1:], tool, args


def call_text(tool: Tool, args: dict) -> str:
    body = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in args.items())
    return f"<tool_call>{tool.name}{body}</tool_call>"


def example(rng: random.Random, render, corpus_text=None) -> tuple[str, str, str]:
    """(kind, prompt, target). `render(messages, tools, enable_thinking)` is the chat template;
    `corpus_text()` gives (code, its continuation) for the `think` kind."""
    roll = rng.random()
    if roll < 0.12 and corpus_text is not None:
        code, more = corpus_text()
        prompt = render([{"role": "user", "content": code}], None, True)
        return "think", prompt, "The user wrote Python; I continue it.</think>" + more
    taken: set[str] = set()
    tools = [_tool(rng, taken) for _ in range(rng.randint(1, 3))]
    schemas = [t.schema() for t in tools]
    ask, tool, args = _call(rng, tools)
    messages = [{"role": "user", "content": ask}]
    reason = f"The user wants to {tool.verb} the {tool.noun}, so I call {tool.name}."
    if roll < 0.35:
        result = rng.choice(RESULTS).format(n=rng.randint(0, 99))
        call = {
            "id": "call_0",
            "type": "function",
            "function": {"name": tool.name, "arguments": json.dumps(args)},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0", "content": result},
        ]
        prompt = render(messages, schemas, None)
        return "answer", prompt, f"The tool answered.</think>The {tool.noun} result: {result}"
    if roll < 0.6:
        return "call_no_think", render(messages, schemas, False), call_text(tool, args)
    return "call", render(messages, schemas, None), f"{reason}</think>" + call_text(tool, args)


def renderer(tokenizer):
    """The chat template as SGLang applies it (tools as OpenAI dicts, arguments as objects)."""

    def render(messages, tools, enable_thinking):
        msgs = []
        for m in messages:
            m = dict(m)
            if m.get("tool_calls"):
                m["tool_calls"] = [
                    {**c, "function": {**c["function"],
                                       "arguments": json.loads(c["function"]["arguments"])}}
                    for c in m["tool_calls"]
                ]  # fmt: skip
            msgs.append(m)
        kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
        return tokenizer.apply_chat_template(
            msgs, tools=tools, tokenize=False, add_generation_prompt=True, **kwargs
        )

    return render
