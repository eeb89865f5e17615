"""What OpenRouter's generation lookup (`GET /api/v1/generation?id=`) needs of a request beyond its
ledger row: finish reasons, reasoning tokens, time generating, streamed or not, which API.

One row per request id, beside the ledger in the same database (migration 0003), written by the
transaction that settles an OpenAI-route request's ledger row (`Ledger.finish`), so a served
request never has its row settled and its stats refused, or the other way round. Tokens, cost,
status and wall times stay in the ledger row: the lookup joins the two (`account.generation`),
and a request with no row here (a native `/generate` call, a failure before the upstream
answered, a crash) is still answered from its ledger row, with these fields null."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.provider.db import Database


@dataclass(frozen=True)
class GenerationStats:
    id: str  # the ledger row's id
    api_type: str  # OpenRouter's api_type: "completions" for chat and text completions
    streamed: bool
    finish_reason: str | None  # OpenRouter's normalized reason
    native_finish_reason: str | None  # the upstream's own
    reasoning_tokens: int
    generation_ms: float | None  # first token to last (streams); the upstream call (unary)

    def values(self) -> tuple:
        """The row after its id, in the table's column order."""
        return (
            self.api_type,
            int(self.streamed),
            self.finish_reason,
            self.native_finish_reason,
            self.reasoning_tokens,
            self.generation_ms,
        )


class GenerationLog:
    """Reads the stats; `Ledger.finish` writes them."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, request_id: str) -> GenerationStats | None:
        rows = self.db.execute(
            "SELECT id, api_type, streamed, finish_reason, native_finish_reason, "
            "reasoning_tokens, generation_ms FROM generation_stats WHERE id=?",
            (request_id,),
        )
        if not rows:
            return None
        r = rows[0]
        return GenerationStats(r[0], r[1], bool(r[2]), r[3], r[4], r[5], r[6])
