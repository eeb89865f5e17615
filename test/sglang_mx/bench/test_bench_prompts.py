"""Token-exact prompts: segment determinism, shared prefixes, text round trip."""

from __future__ import annotations

from sglang_mx.bench.load.prompts import SegmentTokens, materialize
from sglang_mx.capacity.workload import get_preset
from sglang_mx.measure.tracegen import generate


def test_prompts_have_exact_lengths_and_shared_prefixes(tiny_tokenizer):
    tokens = SegmentTokens(tiny_tokenizer)
    assert tokens.text_exact
    trace = generate(get_preset("cpu-2k-32-60").with_overrides(num_requests=8))
    prompts = materialize(trace, tokens)
    for r in trace.requests:
        ids = prompts[r.id]
        assert len(ids) == r.input_len
        key, n = r.segments[0]
        assert ids[:n] == prompts[f"prime:{key}"][:n]
        # decoded text re-encodes to the very same ids, so text endpoints count the same
        assert tiny_tokenizer.encode(tokens.text(ids), add_special_tokens=False).ids == ids
    assert SegmentTokens(tiny_tokenizer).segment("g0", 50) == tokens.segment("g0", 50)
    assert tokens.segment("g0", 10) == tokens.segment("g0", 50)[:10]
    assert tokens.segment("g0", 50) != tokens.segment("g1", 50)
