"""An ideal prefix cache over named prompt segments: which leading tokens of a prompt an earlier
prompt already holds. One rule for two uses: the designed cached tokens of a replayed trace
(traceio, every earlier request counted) and the reachable ones the runner counts while a run
goes (only requests whose first token has streamed: SGLang puts a prompt into its radix tree when
its prefill result is processed, just before that token goes out, so a request sent while the
one that first carried its prefix is still queued or in prefill cannot find it). Both are read
from the run's own clock once it is over (`by_send_time`, `by_first_token`), so a run spread over
processes that share the clock counts them the same way as one process does."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sglang_mx.measure.run_checks import CacheBounds

Segments = Sequence[tuple[str, int]]


class SegmentCache:
    """Segments are (key, length); a segment's tokens are a function of its key (prompts.py), so
    two prompts share tokens exactly as far as they share leading (key, length) pairs, plus the
    common first tokens of the first segment where they differ in length only."""

    def __init__(self, prime: Iterable[tuple[str, int]] = ()) -> None:
        # chain of (key, length) pairs before a position -> key -> lengths seen there
        self._seen: dict[tuple[tuple[str, int], ...], dict[str, set[int]]] = {}
        for key, n in prime:
            self.add([(key, n)])

    def match(self, segments: Segments) -> int:
        """Prompt tokens already held, capped one short of the prompt: SGLang always computes
        a prompt's last token (it needs its logits)."""
        cached, chain = 0, ()
        for key, n in segments:
            lengths = self._seen.get(chain, {}).get(key)
            if not lengths:
                break
            if n not in lengths:  # same tokens as far as the shorter one goes, then apart
                cached += min(n, max(lengths))
                break
            cached += n
            chain = (*chain, (key, n))
        total = sum(n for _, n in segments)
        return max(0, min(cached, total - 1))

    def add(self, segments: Segments) -> None:
        chain: tuple[tuple[str, int], ...] = ()
        for key, n in segments:
            self._seen.setdefault(chain, {}).setdefault(key, set()).add(n)
            chain = (*chain, (key, n))


def by_first_token(
    requests: Sequence, first_token_at: dict[str, float], prime: Iterable[tuple[str, int]] = ()
) -> dict[str, int]:
    """The most each request could have found cached: every request whose first token came
    before its own in the cache (a prefix is shared only once its prefill result is processed,
    which is when that token goes out, and the sharer's own prefill result comes later still).
    `requests` have .id and .segments; `first_token_at` is keyed by id (a request that never
    streamed a token comes last: its prompt may never have been cached)."""
    cache, out = SegmentCache(prime), {}
    for r in sorted(requests, key=lambda r: first_token_at.get(r.id, float("inf"))):
        out[r.id] = cache.match(r.segments)
        cache.add(r.segments)
    return out


def by_send_time(
    requests: Sequence,
    sent_at: dict[str, float],
    first_token_at: dict[str, float],
    prime: Iterable[tuple[str, int]] = (),
) -> dict[str, int]:
    """What the server provably held as each request was sent: the primed prefixes and every
    request whose first token had streamed before it (times on one clock, keyed by id). A request
    never sent finds nothing; one whose first token never came adds nothing."""
    events = [(t, 0, r) for r in requests if (t := first_token_at.get(r.id)) is not None]
    events += [(t, 1, r) for r in requests if (t := sent_at.get(r.id)) is not None]
    cache, out = SegmentCache(prime), {r.id: 0 for r in requests}
    for _, kind, r in sorted(events, key=lambda e: (e[0], e[1])):
        if kind == 0:
            cache.add(r.segments)
        else:
            out[r.id] = cache.match(r.segments)
    return out


def outside_bounds(results: Sequence, chance: int) -> CacheBounds:
    """Requests whose measured cached tokens fall below what the server held when they were
    sent, or above what they could find by their first token plus `chance` tokens (different
    segments may share a first token or two by chance): counts and the first of each."""
    below = [r for r in results if r.ok and r.reachable_cached is not None
             and r.cached_tokens < r.reachable_cached]  # fmt: skip
    above = [r for r in results if r.ok and r.possible_cached is not None
             and r.cached_tokens > r.possible_cached + chance]  # fmt: skip
    first = ""
    if below:
        r = below[0]
        first = f"{r.request_id}: {r.cached_tokens} cached, {r.reachable_cached} held when sent"
    elif above:
        r = above[0]
        first = f"{r.request_id}: {r.cached_tokens} cached, at most {r.possible_cached} could be"
    return CacheBounds(len(below), len(above), first)
