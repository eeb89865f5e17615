"""Designed, reachable and possible cached tokens (reach.py): the segment rule on hand cases, the
first-token ceiling, and the Mooncake sample replayed against a fake whose cache takes a prompt
only once its prefill is done (as SGLang's radix cache does). Replayed fast, each chain's first
repeat overlaps the chain's first request: the design stays 9,216 tokens, what the server held
drops, and every request lies between what was held when it was sent and what it could find by
its first token. Replayed slowly, the whole design is reached."""

from __future__ import annotations

from pathlib import Path

from bench_fake_openai import FakeCache, make_app
from sglang_mx.bench.load.prompts import SegmentTokens
from sglang_mx.bench.load.reach import SegmentCache, by_first_token
from sglang_mx.bench.load.traceio import TraceOptions, load_trace
from sglang_mx.bench.run.runner import WARM_TOLERANCE_TOKENS, RunConfig, run_trace
from sglang_mx_lab.testing.inprocess import serve_in_thread

MOONCAKE = Path(__file__).parents[3] / "benchmark" / "traces" / "sample-mooncake.jsonl"
# the sample's chains: hash ids [0,1,2], [10,11] and [20], each sent 4 times, so 3 repeats x
# (3 + 2 + 1) blocks x 512 tokens are designed to be cached
MOONCAKE_DESIGN = 3 * (3 + 2 + 1) * 512


def test_segment_rule_by_hand():
    c = SegmentCache([("p", 100)])
    assert c.match([("p", 100), ("u", 5)]) == 100
    assert c.match([("p", 60), ("u", 5)]) == 60  # a shorter use of the primed prefix
    assert c.match([("p", 150), ("u", 5)]) == 100  # only what the prime held
    assert c.match([("p", 100)]) == 99  # a prompt's last token is always computed
    assert c.match([("q", 10), ("p", 100)]) == 0  # the same key elsewhere is no prefix
    c.add([("p", 100), ("a", 10), ("b", 10)])
    assert c.match([("p", 100), ("a", 10), ("b", 10), ("c", 3)]) == 120
    # `a` shorter: its 5 tokens match, then `b` starts 5 tokens early and differs
    assert c.match([("p", 100), ("a", 5), ("b", 10)]) == 105


class _R:
    def __init__(self, rid: str, segments: list[tuple[str, int]]) -> None:
        self.id, self.segments = rid, segments


def test_ceiling_follows_first_tokens_not_sends():
    a, b = _R("a", [("x", 512), ("ua", 9)]), _R("b", [("x", 512), ("ub", 9)])
    c = _R("c", [("x", 512), ("uc", 9)])
    # b was sent later but streamed first: a could have found b's prefix, not the other way
    # round; c never streamed, so its prompt cannot be counted as cached for anyone
    got = by_first_token([a, b, c], {"a": 2.0, "b": 1.0})
    assert got == {"b": 0, "a": 512, "c": 512}
    assert by_first_token([a, c], {"c": 1.0}) == {"c": 0, "a": 512}


def _replay(tiny_tokenizer, prefill_s: float, time_scale: float):
    trace = load_trace(MOONCAKE, "mooncake", TraceOptions(time_scale=time_scale))
    tokens = SegmentTokens(tiny_tokenizer)
    prompts = {r.id: tokens.prompt_ids(r) for r in trace.requests}
    with serve_in_thread(make_app(FakeCache(), prefill_s=prefill_s)) as url:
        cfg = RunConfig(url, warmup=0, progress=False, scrape_metrics=False)
        return trace, run_trace(trace, prompts, cfg, tokens)


def test_overlapping_replay_stays_within_bounds(tiny_tokenizer):
    # 0.3 s of prefill against arrivals 17-100 ms apart: every chain's first repeat is sent
    # while the chain's first request is still in prefill
    trace, res = _replay(tiny_tokenizer, prefill_s=0.3, time_scale=0.1)
    s = res.summary
    assert s.errors == 0
    assert sum(r.expected_cached for r in trace.requests) == MOONCAKE_DESIGN
    assert s.expected_cached_tokens == MOONCAKE_DESIGN
    assert s.reachable_cached_tokens <= MOONCAKE_DESIGN - 3 * 512  # r3's 3 blocks at least
    first_repeat = next(r for r in res.results if r.request_id == "r3")
    assert first_repeat.reachable_cached == 0 and first_repeat.cached_tokens < 512
    for r in res.results:
        assert r.reachable_cached <= r.cached_tokens, r
        assert r.cached_tokens <= r.possible_cached + WARM_TOLERANCE_TOKENS, r
    assert s.cache_bounds.below_reachable == 0 == s.cache_bounds.above_possible
    assert any("ARRIVALS OVERLAPPED" in w for w in res.warnings), res.warnings
    assert not any("fewer cache hits" in w or "WARM" in w for w in res.warnings), res.warnings


def test_spaced_replay_reaches_the_whole_design(tiny_tokenizer):
    # 5 ms of prefill against arrivals at least 75 ms apart: nothing overlaps
    _, res = _replay(tiny_tokenizer, prefill_s=0.005, time_scale=0.5)
    s = res.summary
    assert s.reachable_cached_tokens == MOONCAKE_DESIGN == s.possible_cached_tokens
    assert 0 <= s.cached_tokens - MOONCAKE_DESIGN <= WARM_TOLERANCE_TOKENS * s.completed
    assert not any("OVERLAPPED" in w or "bounds" in w for w in res.warnings), res.warnings
