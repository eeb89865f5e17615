"""Radix prefix cache at token capacity, on segment runs instead of token ids.

A sequence is a list of runs (key, n): the first n tokens of segment `key` (bench/load/prompts.py
makes a segment's tokens a fixed function of its key, so equal keys share a prefix and different
keys diverge at once). Like SGLang's RadixCache (srt/mem_cache/radix_cache.py): a match rounds
down to whole pages, matched nodes are locked while a request uses them, and eviction frees the
least recently used unlocked leaves first."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

Run = tuple[str, int]


@dataclass(eq=False)
class Node:
    key: str = ""
    off: int = 0  # first token of this edge is token `off` of segment `key`
    n: int = 0
    parent: Node | None = None
    children: dict[tuple[str, int], Node] = field(default_factory=dict)
    lock: int = 0
    last_access: float = 0.0


class RadixSim:
    def __init__(self, page_size: int = 1, disabled: bool = False) -> None:
        self.root = Node()
        self.root.lock = 1
        self.page_size = page_size
        self.disabled = disabled
        self.total_tokens = 0  # tokens held by the tree
        self.locked_tokens = 0  # of those, on a path some running request uses
        self._tick = itertools.count()

    @property
    def evictable_tokens(self) -> int:
        return self.total_tokens - self.locked_tokens

    def _walk(self, runs: list[Run], now: float, split: bool) -> tuple[Node, int]:
        """Deepest node matching a prefix of `runs`, and the matched length (unrounded)."""
        node, matched = self.root, 0
        for key, n in runs:
            off = 0
            while off < n:
                child = node.children.get((key, off))
                if child is None:
                    return node, matched
                take = min(child.n, n - off)
                if take < child.n:
                    if split:
                        child = self._split(child, take)
                    else:
                        child.last_access = now
                        return node, matched + take
                child.last_access = now
                node, matched, off = child, matched + take, off + take
        return node, matched

    def _split(self, child: Node, at: int) -> Node:
        """Cut `child` after `at` tokens; returns the new upper node."""
        parent = child.parent
        upper = Node(child.key, child.off, at, parent, {}, child.lock, child.last_access)
        parent.children[(child.key, child.off)] = upper
        child.off, child.n, child.parent = child.off + at, child.n - at, upper
        upper.children[(child.key, child.off)] = child
        return upper

    def match(self, runs: list[Run], now: float = 0.0) -> tuple[Node, int]:
        """(node to lock, cached tokens) for a prompt; the length rounds down to whole pages,
        and the node is cut there so locking it pins exactly the reused tokens."""
        if self.disabled:
            return self.root, 0
        _, matched = self._walk(runs, now, split=False)
        matched -= matched % self.page_size
        if matched == 0:
            return self.root, 0
        node, got = self._walk(truncate_runs(runs, matched), now, split=True)
        assert got == matched
        return node, matched

    def insert(self, runs: list[Run], now: float = 0.0) -> tuple[Node, int]:
        """Insert `runs` (page-rounded down); returns (its last node, tokens newly added)."""
        if self.disabled:
            return self.root, 0
        total = sum(n for _, n in runs)
        runs = truncate_runs(runs, total - total % self.page_size)
        node, matched = self._walk(runs, now, split=True)
        added = 0
        pos = 0
        for key, n in runs:
            if pos + n <= matched:
                pos += n
                continue
            start = max(0, matched - pos)
            new = Node(key, start, n - start, node, {}, 0, now)
            node.children[(key, start)] = new
            node, added, pos = new, added + n - start, pos + n
        self.total_tokens += added
        return node, added

    def lock(self, node: Node) -> None:
        while node is not self.root:
            if node.lock == 0:
                self.locked_tokens += node.n
            node.lock += 1
            node = node.parent

    def unlock(self, node: Node) -> None:
        while node is not self.root:
            node.lock -= 1
            if node.lock == 0:
                self.locked_tokens -= node.n
            assert node.lock >= 0, "radix lock underflow"
            node = node.parent

    def evict(self, tokens: int) -> int:
        """Free at least `tokens` from unlocked leaves, oldest first; returns tokens freed."""
        leaves = [(x.last_access, next(self._tick), x) for x in self._nodes() if not x.children]
        heapq.heapify(leaves)
        freed = 0
        while freed < tokens and leaves:
            _, _, x = heapq.heappop(leaves)
            if x.lock or x.children or x is self.root:
                continue
            parent = x.parent
            del parent.children[(x.key, x.off)]
            freed += x.n
            self.total_tokens -= x.n
            if parent is not self.root and not parent.children and not parent.lock:
                heapq.heappush(leaves, (parent.last_access, next(self._tick), parent))
        return freed

    def _nodes(self):
        stack = list(self.root.children.values())
        while stack:
            x = stack.pop()
            yield x
            stack.extend(x.children.values())


def truncate_runs(runs: list[Run], length: int) -> list[Run]:
    """The first `length` tokens of a run list."""
    out, left = [], length
    for key, n in runs:
        if left <= 0:
            break
        out.append((key, min(n, left)))
        left -= n
    return out
