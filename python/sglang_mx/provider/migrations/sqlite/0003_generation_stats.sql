-- What OpenRouter's generation lookup needs beyond a ledger row (generations.py), written in
-- the same transaction that settles the row. IF NOT EXISTS: stores opened before this
-- migration already have the table, made by the code itself.
CREATE TABLE IF NOT EXISTS generation_stats (
    id TEXT PRIMARY KEY,
    api_type TEXT NOT NULL,
    streamed INTEGER NOT NULL,
    finish_reason TEXT,
    native_finish_reason TEXT,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    generation_ms REAL
);
