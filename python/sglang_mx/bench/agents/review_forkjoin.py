"""Fork/join review: one long shared document, forked into reviewers with different briefs
(all reuse the document's cached prefix), joined into a summary."""

from __future__ import annotations

import sys

import sglang as sgl

from sglang_mx.bench.agents.common import cli, stdlib_document

BRIEFS = ("correctness", "performance", "style")


@sgl.function
def review(s, session: int, max_tokens: int = 8, context_chars: int = 3000):
    s += f"Code review {session}. File under review:\n"
    s += stdlib_document("textwrap", context_chars) + "\n"
    # Wait for the text so far: SGLang 0.5.23's fork() decides whether to prefill the shared
    # prefix (one call, then every branch reads it from cache) from text it has not yet synced,
    # so without this the prefill is skipped at random and one branch computes the document.
    s.text()
    forks = s.fork(len(BRIEFS))
    for f, brief in zip(forks, BRIEFS, strict=True):
        f += f"Review for {brief}:"
        f += sgl.gen("review", max_tokens=max_tokens, temperature=0)
    forks.join()
    s += "Summary of reviews:\n"
    for f, brief in zip(forks, BRIEFS, strict=True):
        s += f"- {brief}: {f['review']}\n"
    s += "Verdict:" + sgl.gen("verdict", max_tokens=max_tokens, temperature=0)


main = cli(review, __doc__ or "")

if __name__ == "__main__":
    sys.exit(main())
