"""streams.ledger_problems, the check the fault campaigns (test_router_topology.py, pd_faults)
hold the provider's ledger to, on a real ledger (SQLite) with rows written as the provider writes
them: a failed stream billed less than the chunks its client received, more than max_tokens, or
as ok is named; one billed its chunks (or more: several tokens to a chunk) passes. Where the
client counted its tokens (logprobs), the plants of issue 54, item 5b: a provider that bills
chunks - 3 or chunks + 5 is named, one token over passes (an empty-text step: ledger_problems
says why); without the count only the chunks and max_tokens bound it."""

from __future__ import annotations

from sglang_mx.provider.ledger import Ledger
from sglang_mx_lab.testing.streams import ledger_problems


def _failed(rid: str, chunks: int) -> dict:
    return {"rid": rid, "status": 200, "chunks": chunks, "usage": None,
            "error": {"message": "upstream failed mid-stream"}}  # fmt: skip


def _ledger(tmp_path, billed: dict[str, int]):
    """A ledger whose rows failed mid-stream, each billed its `billed` completion tokens."""
    db = tmp_path / "ledger.db"
    ledger = Ledger(db)
    for rid, tokens in billed.items():
        ledger.start(rid, "k1", "m")
        ledger.finish(rid, "error", 12, tokens, 0, 0.0, "upstream failed mid-stream")
    return db


def test_a_failed_stream_is_billed_at_least_what_its_client_received(tmp_path):
    billed = {"exact": 7, "merged": 9, "under": 3, "over": 40}
    db = _ledger(tmp_path, billed)
    results = [_failed(rid, 7) for rid in billed]
    problems = ledger_problems(db, results, max_tokens=32)
    assert problems == ["under: failed, billed 3 tokens for the 7 chunks its client received",
                        "over: failed, row error/40"]  # fmt: skip


def test_a_counted_failed_stream_is_billed_within_one_of_its_tokens(tmp_path):
    """20 chunks and 20 logprob entries received, at most 32 tokens: billed 17 (chunks - 3) or
    25 (chunks + 5) is named; 20 and 21 (one empty-text step unseen) pass. The same 25 with no
    token count passes: chunks alone bound a coalescing stream from below only."""
    billed = {"minus3": 17, "exact": 20, "one-over": 21, "plus5": 25}
    db = _ledger(tmp_path, billed)
    counted = [_failed(rid, 20) | {"tokens": 20} for rid in billed]
    assert ledger_problems(db, counted, max_tokens=32) == [
        "minus3: failed, billed 17 tokens for the 20 chunks its client received",
        "plus5: failed, billed 25 tokens for the 20 its client received (its logprobs)",
    ]
    assert ledger_problems(db, [_failed("plus5", 20)], max_tokens=32) == []
