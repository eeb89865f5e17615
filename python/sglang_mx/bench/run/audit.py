"""The token audit of one run: three counts of the same tokens must agree.

- client: what the load generator sent (its prompt ids, or its text re-encoded) and the streamed
  output text re-encoded with the same tokenizer;
- usage: what the server returned per request (`usage.prompt_tokens`, `completion_tokens`,
  `prompt_tokens_details.cached_tokens`), summed;
- server: the increase of the server's Prometheus counters over the measured requests
  (promscrape.COUNTERS: `sglang:prompt_tokens_total` ... or vLLM's names).

With `ignore_eos` every request must also have produced exactly its `max_tokens`. A count off by
more than its threshold fails the run, naming which count is off. Thresholds: usage against the
server's counters and the client's prompt ids must agree to `tolerance` (default 1%: they count
the same ids); re-encoded output text to `retokenize_tolerance` (default 5%: decode -> encode is
not an inverse for arbitrary generated tokens, it may merge or split a few)."""

from __future__ import annotations

from collections.abc import Sequence

from sglang_mx.measure.metrics import RequestResult
from sglang_mx.measure.run_checks import TokenAudit

TOLERANCE = 0.01
RETOKENIZE_TOLERANCE = 0.05


def _row(name: str, what: str, a: float, b: float, tol: float, a_is: str, b_is: str) -> dict:
    diff = a - b
    rel = abs(diff) / max(abs(b), 1.0)
    return {
        "check": name,
        "what": what,
        a_is: a,
        b_is: b,
        "diff": diff,
        "relative": rel,
        "tolerance": tol,
        "ok": rel <= tol,
    }


def count_client_output(results: Sequence[RequestResult], tokenizer) -> None:
    """Fill each completed request's client_completion_tokens from its streamed text (and its
    client_prompt_tokens from nothing: that one is set when ids are sent)."""
    for r in results:
        if r.ok and r.output_text:
            r.client_completion_tokens = len(
                tokenizer.encode(r.output_text, add_special_tokens=False).ids
            )


def audit(
    results: Sequence[RequestResult],
    server_delta: dict,
    ignore_eos: bool,
    tolerance: float = TOLERANCE,
    retokenize_tolerance: float = RETOKENIZE_TOLERANCE,
) -> TokenAudit:
    """The audit record of one run (see the module docstring); `server_delta` is
    promscrape.counter_delta over the measured requests ({} when the server has no counters),
    kept in the record as `server_counters`."""
    ok = [r for r in results if r.ok]
    rows, skipped = [], []
    usage = [r for r in ok if r.usage_reported]
    if len(usage) < len(ok):
        skipped.append(f"{len(ok) - len(usage)} requests returned no usage")
    u_prompt = sum(r.prompt_tokens for r in usage)
    u_out = sum(r.completion_tokens for r in usage)
    u_cached = sum(r.cached_tokens for r in usage)

    # The client's own counts against usage, over the requests the client counted:
    # (check, what, the client's count, usage's count, tolerance, why it is skipped).
    for name, what, client, counted_as, tol, why_not in (
        ("prompt tokens: client vs usage", "prompt", "client_prompt_tokens", "prompt_tokens",
         tolerance, "client prompt count (text or chat prompts: the template adds tokens)"),
        ("output tokens: client re-encoded vs usage", "output", "client_completion_tokens",
         "completion_tokens", retokenize_tolerance,
         "client output count (no tokenizer or no streamed text)"),
    ):  # fmt: skip
        counted = [r for r in usage if getattr(r, client) is not None]
        if not counted:
            skipped.append(why_not)
            continue
        mine = sum(getattr(r, client) for r in counted)
        theirs = sum(getattr(r, counted_as) for r in counted)
        rows.append(_row(name, what, mine, theirs, tol, "client", "usage"))
    for name, mine in (
        ("prompt_tokens", u_prompt),
        ("generation_tokens", u_out),
        ("cached_tokens", u_cached),
    ):
        if name in server_delta and len(usage) == len(results):
            rows.append(
                _row(
                    f"{name}: usage vs server counter",
                    name,
                    mine,
                    server_delta[name],
                    tolerance,
                    "usage",
                    "server",
                )
            )
    if not server_delta:
        skipped.append("server counters (no /metrics; SGLang needs --enable-metrics)")
    elif len(usage) < len(results):
        skipped.append("server counters (failed requests make the sums incomparable)")
    short = []
    if ignore_eos:
        short = [r.request_id for r in usage if r.completion_tokens != r.requested_output]
        rows.append(
            {
                "check": "ignore_eos: every request got max_tokens",
                "what": "length",
                "requests_off": len(short),
                "first": short[:5],
                "ok": not short,
            }
        )
    failed = tuple(r["check"] for r in rows if not r["ok"])
    return TokenAudit(
        ok=not failed,
        checks=tuple(rows),
        failed=failed,
        skipped=tuple(skipped),
        tolerance=tolerance,
        retokenize_tolerance=retokenize_tolerance,
        message="; ".join(_explain(r) for r in rows if not r["ok"]),
        server_counters=server_delta,
    )


def _explain(row: dict) -> str:
    if "requests_off" in row:
        return (
            f"{row['requests_off']} requests did not get their max_tokens with ignore_eos "
            f"(first: {', '.join(row['first'])})"
        )
    a, b = [k for k in row if k in ("client", "usage", "server")]
    return (
        f"{row['check']}: {a} {row[a]:g} vs {b} {row[b]:g} "
        f"({row['relative']:.1%} off, threshold {row['tolerance']:.1%})"
    )
