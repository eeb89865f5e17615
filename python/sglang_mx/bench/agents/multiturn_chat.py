"""Multi-turn chat: a system prompt and a growing conversation; every turn re-sends the whole
history, so all but the newest user message should come from the cache."""

from __future__ import annotations

import sys

import sglang as sgl

from sglang_mx.bench.agents.common import cli, stdlib_document

QUESTIONS = (
    "What does this module do?",
    "Which function is the entry point?",
    "How are errors reported?",
    "Suggest one test.",
)


@sgl.function
def chat(s, session: int, turns: int = 4, max_tokens: int = 8, context_chars: int = 2000):
    s += "System: you answer questions about this code.\n"
    s += stdlib_document("shlex", context_chars) + "\n"
    for t in range(turns):
        s += f"User ({session}): {QUESTIONS[t % len(QUESTIONS)]}\nAssistant:"
        s += sgl.gen(f"turn{t}", max_tokens=max_tokens, temperature=0)
        s += "\n"


main = cli(chat, __doc__ or "")

if __name__ == "__main__":
    sys.exit(main())
