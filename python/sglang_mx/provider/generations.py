"""What OpenRouter's generation lookup (`GET /api/v1/generation?id=`) needs of a request beyond
its ledger row: finish reasons, reasoning tokens, time generating, streamed or not, which API.

One row per request id, beside the ledger in the same database, written once when an OpenAI-route
request finishes (`openai_service`). Tokens, cost, status and wall times stay in the ledger row:
the lookup joins the two (`account.generation`), and a request with no row here (a native
`/generate` call, a failure before the upstream answered, a crash) is still answered from its
ledger row, with these fields null."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.provider.db import Database

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generation_stats (
    id TEXT PRIMARY KEY,
    api_type TEXT NOT NULL,
    streamed INTEGER NOT NULL,
    finish_reason TEXT,
    native_finish_reason TEXT,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    generation_ms REAL
);
"""


@dataclass(frozen=True)
class GenerationStats:
    id: str  # the ledger row's id
    api_type: str  # OpenRouter's api_type: "completions" for chat and text completions
    streamed: bool
    finish_reason: str | None  # OpenRouter's normalized reason
    native_finish_reason: str | None  # the upstream's own
    reasoning_tokens: int
    generation_ms: float | None  # first token to last (streams); the upstream call (unary)


class GenerationLog:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.db.executescript(_SCHEMA)

    def record(self, s: GenerationStats) -> None:
        self.db.write(
            "INSERT INTO generation_stats (id, api_type, streamed, finish_reason, "
            "native_finish_reason, reasoning_tokens, generation_ms) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",  # the first record of a request stands
            (
                s.id,
                s.api_type,
                int(s.streamed),
                s.finish_reason,
                s.native_finish_reason,
                s.reasoning_tokens,
                s.generation_ms,
            ),
        )

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
