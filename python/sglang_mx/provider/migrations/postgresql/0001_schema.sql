-- The shared store: keys, the ledger, key balances (spent and reserved in flight), the
-- rate-limit window and the replicas' leases. Money is NUMERIC: sums are exact, so a key's
-- balance equals the sum of its ledger rows to the last digit. Times are epoch seconds.
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    created DOUBLE PRECISION NOT NULL,
    revoked DOUBLE PRECISION,
    rpm INTEGER,
    tpm INTEGER,
    limit_usd NUMERIC
);
CREATE TABLE ledger (
    id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    cost NUMERIC NOT NULL DEFAULT 0,
    created DOUBLE PRECISION NOT NULL,
    finished DOUBLE PRECISION,
    error TEXT,
    reserved NUMERIC NOT NULL DEFAULT 0,
    replica TEXT
);
CREATE INDEX ledger_key ON ledger (key_id);
CREATE INDEX ledger_pending ON ledger (replica) WHERE status = 'pending';
CREATE TABLE key_balance (
    key_id TEXT PRIMARY KEY,
    spent NUMERIC NOT NULL DEFAULT 0,
    reserved NUMERIC NOT NULL DEFAULT 0
);
-- One row per admission (requests) or settled request (tokens) in the last minute, per key.
CREATE TABLE rate_events (
    key_id TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    requests INTEGER NOT NULL DEFAULT 0,
    tokens BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX rate_events_key_at ON rate_events (key_id, at);
-- A provider process: `heartbeat` (the database's clock) older than the lease, or `stopped`
-- set, and its pending rows are settled by whichever replica sweeps next.
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started DOUBLE PRECISION NOT NULL,
    heartbeat DOUBLE PRECISION NOT NULL,
    stopped DOUBLE PRECISION
);
CREATE INDEX replicas_name ON replicas (name) WHERE stopped IS NULL;
