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


def judge(claim_spec: dict | None, runs: list[Acceptance], tolerance: float) -> dict:
    """Blockers, failures and notes of a verify run's acceptance against the claim's
    `speculative` section (claims/claim_file.py): a draft claimed but absent, or a real accept
    length below (1 - tolerance) x the claimed one, refutes; a simulated one is reported beside
    the real."""
    out: dict = {"blockers": [], "failures": [], "notes": [], "record": None}
    if not claim_spec:
        return out
    claimed = claim_spec.get("accept_length")
    simulated = bool(claim_spec.get("simulated"))
    lengths = [r.accept_length for r in runs]
    out["record"] = {"algorithm": claim_spec.get("algorithm"), "claimed": claimed,
                     "simulated": simulated, "measured": lengths}  # fmt: skip
    if not all(r.counted for r in runs):
        out["blockers"].append(
            "the claim states speculative decoding, but the server exports no counters to read "
            "its acceptance (SGLang: --enable-metrics): a run with them would decide"
        )
        return out
    off = [i for i, r in enumerate(runs, 1) if not r.speculative]
    if off:
        out["failures"].append(
            f"the claim states speculative decoding ({claim_spec.get('algorithm')}), but "
            f"repeat(s) {', '.join(map(str, off))} ran no verify step: the draft is off"
        )
        return out
    mean = sum(lengths) / len(lengths)
    if claimed is None:
        out["notes"].append(f"accept length {mean:.3g} measured; the claim states none")
    elif simulated:
        out["notes"].append(
            f"the claimed figure used simulated acceptance (accept length {claimed:g}); this "
            f"run's drafts really accepted {mean:.3g}: the verdict is on the figure at the real "
            "acceptance"
        )
    elif mean < claimed * (1 - tolerance):
        out["failures"].append(
            f"accept length {mean:.3g} measured (SGLang's counters), below the claimed "
            f"{claimed:g} by more than {tolerance:.0%}"
        )
    else:
        out["notes"].append(f"accept length {mean:.3g} measured against {claimed:g} claimed")
    return out
