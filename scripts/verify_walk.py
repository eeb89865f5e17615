"""The verify walk: run `sglang-mx bench verify CLAIM --url URL ...` in this process under
`sys.setprofile` and count how often control moves between sglang_mx modules, and between the
rooms they stand in, on its way from the command line to the written verdict (issue 60: one
pipeline reads as a short walk).

Counting, exactly:

- Only the verb's own call is traced: the parser is built and the arguments read first, then
  `args.func(args)` runs under the profile hook. Import-time work is not part of the walk: a
  module body (`<module>`) is never entered, nor is anything called while a sglang_mx module body
  is on the stack.
- An *entry* is a Python `call` event (never `c_call`) of a function whose module
  (`frame.f_globals["__name__"]`) is `sglang_mx` or below it. A coroutine or generator resumed
  after a suspension makes no new entry: only the first `call` event of a frame counts.
- Its *caller module* is the module of the nearest frame below it on the stack that is in
  sglang_mx (library frames in between, asyncio's event loop or argparse, are looked through);
  the verb's own function has the caller `<cli>`. An entry whose module is its caller's module
  is no move and is dropped.
- At a level, module or room (`room()`: `sglang_mx.bench.<room>` inside bench, else
  `sglang_mx.<package>`), each entry is a move from the caller's unit to the callee's; moves
  inside one unit are dropped. A *stop* is the first move along each (from, to) edge: a loop
  over requests or repeats, or a second call along an edge already walked, adds none (counting
  every move would count the workload's size, not the code's shape).
- A stop is a *return* when its unit was entered before (`<cli>` counts as entered): the walk
  comes back to a place it has left. So returns = stops - distinct units entered.

The issue's target is counted at the room level (<= 20 stops, <= 8 returns): `--max-stops`
and `--max-returns` make it a check (exit 1 above either). The module level is printed beside
it, with each level's per-unit list and the walk itself.

    python scripts/verify_walk.py                 # starts the bench tests' fake server
    python scripts/verify_walk.py --url URL --tokenizer DIR --claim FILE
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "sglang_mx"
GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


def _module(frame) -> str:
    return frame.f_globals.get("__name__", "") or ""


def _ours(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def room(module: str) -> str:
    """A module's room: `sglang_mx.bench.<room>` inside bench (its subpackages by job),
    `sglang_mx.<package>` elsewhere (measure, capacity, plan, ...; a top-level module is its own
    room)."""
    parts = module.split(".")
    return ".".join(parts[: 3 if parts[1:2] == ["bench"] else 2])


@dataclass
class Walk:
    """Every entry of one traced call that crosses modules (see the module docstring), each
    (caller module, callee module, callee function) once per calling function, in order."""

    start: str = "<cli>"
    entries: list[tuple[str, str, str]] = field(default_factory=list)
    _calls: set = field(default_factory=set)
    _resumable: dict = field(default_factory=dict)  # id(frame) -> frame, kept alive

    def hook(self, frame, event: str, _arg) -> None:
        if event != "call":
            return
        module = _module(frame)
        if not _ours(module) or frame.f_code.co_name == "<module>":
            return
        if frame.f_code.co_flags & GEN_FLAGS:
            if id(frame) in self._resumable:
                return  # a resumption, not an entry
            self._resumable[id(frame)] = frame
        caller, caller_code = self.start, None
        back = frame.f_back
        while back is not None:
            name = _module(back)
            if back.f_code.co_name == "<module>" and _ours(name):
                return  # import-time work: a module body is running below this call
            if _ours(name) and caller_code is None:
                caller, caller_code = name, back.f_code
            back = back.f_back
        if caller == module or (caller_code, frame.f_code) in self._calls:
            return
        self._calls.add((caller_code, frame.f_code))
        self.entries.append((caller, module, frame.f_code.co_name))

    def stops(self, level: Callable[[str], str]) -> tuple[list[tuple[str, str]], int]:
        """The stops at `level` (module or room) and how many of them are returns."""
        entered, edges, stops, returns = {self.start}, set(), [], 0
        for caller, module, _ in self.entries:
            a, b = (x if x == self.start else level(x) for x in (caller, module))
            if a == b or (a, b) in edges:
                continue
            edges.add((a, b))
            returns += b in entered
            entered.add(b)
            stops.append((a, b))
        return stops, returns

    def render(self, listing: bool = True) -> str:
        lines = []
        for name, level in (("modules", lambda m: m), ("rooms", room)):
            stops, returns = self.stops(level)
            per: dict[str, int] = {}
            for _, b in stops:
                per[b] = per.get(b, 0) + 1
            lines += [f"{name}: stops {len(stops)}, returns {returns}, {len(per)} {name}",
                      f"  per {name[:-1]} (stops into it):"]  # fmt: skip
            lines += [f"    {n:3d}  {m}" for m, n in per.items()]
            if listing:
                lines += [f"  the walk between {name}:"]
                lines += [f"    {i:3d}  {a} -> {b}" for i, (a, b) in enumerate(stops, 1)]
            lines.append("")
        return "\n".join(lines)


def trace(fn: Callable[[], object], start: str = "<cli>") -> tuple[object, Walk]:
    """Call `fn()` under the profile hook; its return value and its walk."""
    walk = Walk(start=start)
    previous = sys.getprofile()
    sys.setprofile(walk.hook)
    try:
        value = fn()
    finally:
        sys.setprofile(previous)
    return value, walk


def walk_verb(argv: list[str]) -> tuple[int, Walk]:
    """`sglang-mx ARGV` with only the verb's call traced: (its exit status, its walk)."""
    from sglang_mx.cli.main import build_parser

    args = build_parser().parse_args(argv)
    args.extra = []
    status, walk = trace(lambda: args.func(args))
    return int(status or 0), walk


@contextlib.contextmanager
def fake_endpoint(workdir: Path) -> Iterator[tuple[str, str, str]]:
    """The bench tests' fake OpenAI server (real HTTP, Prometheus counters), their in-memory
    tokenizer and claim file: (url, tokenizer dir, claim path)."""
    bench_tests = ROOT / "test" / "sglang_mx" / "bench"
    sys.path.insert(0, str(bench_tests))
    from bench_processes import fake_server_process
    from bench_tiny_tokenizer import train_tokenizer
    from claim_files import write_claim

    train_tokenizer().save(str(workdir / "tokenizer.json"))
    claim = write_claim(workdir, 1.0)
    with fake_server_process() as url:
        yield url, str(workdir), claim


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a live endpoint (default: start the bench tests' fake server)")
    p.add_argument("--tokenizer", help="tokenizer directory (with --url)")
    p.add_argument("--claim", help="claim file (with --url)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--max-stops", type=int)
    p.add_argument("--max-returns", type=int)
    p.add_argument("-q", "--quiet", action="store_true", help="no walk listing")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if a.url:
            if not (a.tokenizer and a.claim):
                p.error("--url needs --tokenizer and --claim")
            url, tok, claim = a.url, a.tokenizer, a.claim
        else:
            url, tok, claim = stack.enter_context(fake_endpoint(Path(tmp)))
        status, walk = walk_verb(
            [
                "bench",
                "verify",
                claim,
                "--url",
                url,
                "--tokenizer",
                tok,
                "--hardware",
                "MI355X",
                "--repeats",
                str(a.repeats),
                "--warmup",
                "0",
                "--no-progress",
                "-o",
                str(Path(tmp) / "out"),
            ]  # fmt: skip
        )
    print(walk.render(listing=not a.quiet))
    print(f"verify exit status {status}")
    stops, returns = walk.stops(room)
    over = []
    if a.max_stops is not None and len(stops) > a.max_stops:
        over.append(f"{len(stops)} stops > {a.max_stops}")
    if a.max_returns is not None and returns > a.max_returns:
        over.append(f"{returns} returns > {a.max_returns}")
    if over:
        print("walk too long: " + ", ".join(over), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
