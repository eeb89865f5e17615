-- The embedded store as it was before versioned migrations (IF NOT EXISTS: files made then
-- pass through unchanged).
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    revoked REAL,
    rpm INTEGER,
    tpm INTEGER,
    limit_usd REAL
);
CREATE TABLE IF NOT EXISTS ledger (
    id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    finished REAL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS ledger_key ON ledger (key_id);
CREATE INDEX IF NOT EXISTS ledger_status ON ledger (status);
