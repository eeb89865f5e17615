"""streams.ledger_problems, the check the fault campaigns (test_router_topology.py, pd_faults)
hold the provider's ledger to, on a real ledger (SQLite) with rows written as the provider writes
them: a failed stream billed less than the chunks its client received, more than max_tokens, or
as ok is named; one billed its chunks (or more: several tokens to a chunk) passes. The plants
of issue 54, item 5b: a provider that bills chunks - 3 is caught; one that bills chunks + 5
is not, and cannot be from the client's side of a real stream (ledger_problems says why:
within one token is checked on the scripted upstream, test_replicas.py)."""

from __future__ import annotations

from sglang_mx.provider.ledger import Ledger
from sglang_mx_lab.testing.streams import ledger_problems


def _failed(rid: str, chunks: int) -> dict:
    return {"rid": rid, "status": 200, "chunks": chunks, "usage": None,
            "error": {"message": "upstream failed mid-stream"}}  # fmt: skip


def test_a_failed_stream_is_billed_at_least_what_its_client_received(tmp_path):
    db = tmp_path / "ledger.db"
    ledger = Ledger(db)
    billed = {"exact": 7, "merged": 9, "under": 3, "over": 40}
    for rid, tokens in billed.items():
        ledger.start(rid, "k1", "m")
        ledger.finish(rid, "error", 12, tokens, 0, 0.0, "upstream failed mid-stream")
    results = [_failed(rid, 7) for rid in billed]
    problems = ledger_problems(db, results, max_tokens=32)
    assert problems == ["under: failed, billed 3 tokens for the 7 chunks its client received",
                        "over: failed, row error/40"]  # fmt: skip


def test_the_plants_a_provider_that_bills_chunks_minus_3_or_plus_5(tmp_path):
    """A failed stream whose client received 20 content chunks of at most 32 tokens: billed 17
    (chunks - 3) is named; billed 25 (chunks + 5) passes, as billing 25 is also what an honest
    provider does when SGLang merged five steps into others' chunks (the bound the client can
    hold a real stream to is max_tokens: 33 is named)."""
    db = tmp_path / "ledger.db"
    ledger = Ledger(db)
    billed = {"minus3": 17, "plus5": 25, "over-max": 33}
    for rid, tokens in billed.items():
        ledger.start(rid, "k1", "m")
        ledger.finish(rid, "error", 12, tokens, 0, 0.0, "upstream failed mid-stream")
    problems = ledger_problems(db, [_failed(rid, 20) for rid in billed], max_tokens=32)
    assert problems == ["minus3: failed, billed 17 tokens for the 20 chunks its client received",
                        "over-max: failed, row error/33"]  # fmt: skip
