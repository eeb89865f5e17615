"""Speculative decoding's real acceptance over a run, from the server's own counters (issue 45,
item 4): a throughput claimed with a draft is only as good as the drafts that landed, and
published MTP cells often simulate acceptance (`SGLANG_SIMULATE_ACC_LEN`).

Accept length = tokens emitted per verify step, bonus token included, as SGLang defines it per
request (completion tokens / verify steps):
- SGLang: generation_tokens_total / spec_verify_calls_total over the measured requests;
- vLLM: 1 + spec_decode_num_accepted_tokens_total / spec_decode_num_drafts_total.
A server that counts tokens but no verify step ran no draft."""

from __future__ import annotations

from sglang_mx.measure.run_checks import Acceptance


def measured(delta: dict) -> Acceptance:
    """The run's acceptance record from promscrape.counter_delta over its measured requests:
    {"counted": False} when the server exports no counters; else `speculative` (did a draft
    run) and, when it did, `accept_length` with the counts behind it."""
    if not delta:
        return Acceptance(False)
    verify, drafts = delta.get("spec_verify_calls", 0.0), delta.get("spec_drafts", 0.0)
    if verify > 0:
        tokens = delta.get("generation_tokens", 0.0)
        counts = {"verify_steps": verify, "generation_tokens": tokens}
        return Acceptance(True, True, tokens / verify, counts)
    if drafts > 0:
        accepted = delta.get("spec_accepted_tokens", 0.0)
        counts = {"drafts": drafts, "accepted_tokens": accepted}
        return Acceptance(True, True, 1 + accepted / drafts, counts)
    return Acceptance(True, False, None)
