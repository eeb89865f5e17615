"""Tool-using agent loop: a system prompt with tool specs, then think -> call tool -> observe,
each step re-sending the growing transcript (the shared prefix is everything so far)."""

from __future__ import annotations

import sys

import sglang as sgl

from sglang_mx.bench.agents.common import cli, stdlib_document

TOOLS = {
    "grep": lambda arg: f"3 matches for {arg!r} in json/decoder.py",
    "read": lambda arg: f"def {arg}(s, end):\n    return s[end:]",
    "calc": lambda arg: str(sum(ord(c) for c in arg) % 997),
}
SYSTEM = (
    "You are a coding agent. Tools: grep(pattern), read(name), calc(expr). Reply with one line "
    "`tool: argument`. Repository context follows.\n"
)


def pick_tool(step: int, text: str) -> tuple[str, str]:
    """The tool the model named, else a deterministic one (a toy model rarely names one)."""
    for name in TOOLS:
        if text.strip().startswith(name):
            return name, text.split(":", 1)[-1].strip()[:32] or "x"
    name = list(TOOLS)[step % len(TOOLS)]
    return name, f"step{step}"


@sgl.function
def tool_agent(s, session: int, steps: int = 3, max_tokens: int = 8, context_chars: int = 3000):
    s += SYSTEM + stdlib_document("json.decoder", context_chars)
    s += f"\nTask {session}: find where JSON strings are scanned.\n"
    for step in range(steps):
        s += f"Step {step}:"
        s += sgl.gen(f"act{step}", max_tokens=max_tokens, temperature=0)
        name, arg = pick_tool(step, s[f"act{step}"])
        s += f"\nObservation ({name}): {TOOLS[name](arg)}\n"
    s += "Answer:" + sgl.gen("answer", max_tokens=max_tokens, temperature=0)


main = cli(tool_agent, __doc__ or "", steps=3)

if __name__ == "__main__":
    sys.exit(main())
