-- The request path in two round trips (a served request: admission with its rows opened,
-- then settlement with its generation stats) and a rate window whose cost does not grow with
-- a key's requests per minute.

-- What OpenRouter's generation lookup needs beyond a ledger row (generations.py). IF NOT
-- EXISTS: stores opened before this migration already have the table, made by the code itself.
CREATE TABLE IF NOT EXISTS generation_stats (
    id TEXT PRIMARY KEY,
    api_type TEXT NOT NULL,
    streamed INTEGER NOT NULL,
    finish_reason TEXT,
    native_finish_reason TEXT,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    generation_ms DOUBLE PRECISION
);

-- mx_finish and the row's generation stats in one round trip and one transaction: a served
-- request's settlement and its stats land together or not at all (the first stats of a row
-- stand). Returns what mx_finish returns.
CREATE FUNCTION mx_settle(
    p_row TEXT, p_status TEXT, p_prompt INTEGER, p_completion INTEGER, p_cached INTEGER,
    p_cost NUMERIC, p_error TEXT, p_api_type TEXT, p_streamed INTEGER, p_finish TEXT,
    p_native_finish TEXT, p_reasoning INTEGER, p_generation_ms DOUBLE PRECISION)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
    settled BOOLEAN := mx_finish(p_row, p_status, p_prompt, p_completion, p_cached, p_cost,
                                 p_error);
BEGIN
    INSERT INTO generation_stats (id, api_type, streamed, finish_reason, native_finish_reason,
                                  reasoning_tokens, generation_ms)
        VALUES (p_row, p_api_type, p_streamed, p_finish, p_native_finish, p_reasoning,
                p_generation_ms)
        ON CONFLICT (id) DO NOTHING;
    RETURN settled;
END $$;

-- A request's admission (mx_admit) and the opening of its rows with their reservation
-- (mx_open) in one round trip and one transaction. wait > 0: not admitted, nothing written
-- (ok, spent, reserved are NULL). wait = 0 and ok false: admitted (it counts against the
-- key's requests per minute, as a refusal by mx_open after mx_admit did) but refused by the
-- cap, no row written.
CREATE FUNCTION mx_admit_open(
    p_rpm INTEGER, p_tpm BIGINT, p_n INTEGER,
    p_rows TEXT[], p_key TEXT, p_model TEXT, p_replica TEXT, p_reserve NUMERIC, p_limit NUMERIC,
    OUT wait DOUBLE PRECISION, OUT ok BOOLEAN, OUT spent NUMERIC, OUT reserved NUMERIC)
LANGUAGE plpgsql AS $$
BEGIN
    wait := mx_admit(p_key, p_rpm, p_tpm, p_n);
    IF wait > 0 THEN
        RETURN;
    END IF;
    SELECT o.ok, o.spent, o.reserved INTO ok, spent, reserved
        FROM mx_open(p_rows, p_key, p_model, p_replica, p_reserve, p_limit) o;
END $$;

-- The rate window in one-second buckets: a row per key per second (requests admitted, tokens
-- settled), so admission sums at most 61 rows however many requests a key sends a minute (one
-- row per event cost 1.1 ms an admission at 4,500 events in the window on the development
-- box). An event in bucket b happened in [b, b + 1): it is counted until b + 61, up to a second
-- longer than its own minute, never less (a limit is never passed, a wait may be 1 s long).
CREATE TABLE rate_buckets (
    key_id TEXT NOT NULL,
    at BIGINT NOT NULL,
    requests BIGINT NOT NULL DEFAULT 0,
    tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, at)
);
INSERT INTO rate_buckets (key_id, at, requests, tokens)
    SELECT key_id, floor(at)::BIGINT, SUM(requests), SUM(tokens) FROM rate_events GROUP BY 1, 2;
DROP TABLE rate_events;
ALTER TABLE rate_buckets RENAME TO rate_events;

CREATE OR REPLACE FUNCTION mx_admit(p_key TEXT, p_rpm INTEGER, p_tpm BIGINT, p_n INTEGER)
RETURNS DOUBLE PRECISION LANGUAGE plpgsql AS $$
DECLARE
    now_s DOUBLE PRECISION;
    reqs BIGINT;
    toks BIGINT;
    t BIGINT;
    wait DOUBLE PRECISION := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 57));
    now_s := mx_now();
    DELETE FROM rate_events WHERE key_id = p_key AND at <= now_s - 61;
    SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0) INTO reqs, toks
        FROM rate_events WHERE key_id = p_key;
    IF reqs + p_n > p_rpm THEN
        -- the bucket after whose expiry enough requests have left the window
        SELECT s.at INTO t FROM (
            SELECT at, SUM(requests) OVER (ORDER BY at) AS cum
            FROM rate_events WHERE key_id = p_key AND requests > 0) s
        WHERE s.cum >= reqs + p_n - p_rpm ORDER BY s.at LIMIT 1;
        wait := t + 61 - now_s;
    END IF;
    IF toks >= p_tpm THEN
        -- tokens are charged when a request settles: wait until the sum drops below tpm
        SELECT s.at INTO t FROM (
            SELECT at, SUM(tokens) OVER (ORDER BY at) AS cum
            FROM rate_events WHERE key_id = p_key AND tokens > 0) s
        WHERE toks - s.cum < p_tpm ORDER BY s.at LIMIT 1;
        wait := GREATEST(wait, t + 61 - now_s);
    END IF;
    IF wait > 0 THEN
        -- at most 60 s, as a one-minute window promises: a client retrying then may meet the
        -- bucket's last second, and a second 429 saying 1 s
        RETURN LEAST(60, GREATEST(1, CEIL(wait)));
    END IF;
    INSERT INTO rate_events AS e (key_id, at, requests) VALUES (p_key, floor(now_s), p_n)
        ON CONFLICT (key_id, at) DO UPDATE SET requests = e.requests + EXCLUDED.requests;
    RETURN 0;
END $$;

CREATE OR REPLACE FUNCTION mx_finish(
    p_row TEXT, p_status TEXT, p_prompt INTEGER, p_completion INTEGER, p_cached INTEGER,
    p_cost NUMERIC, p_error TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
    k TEXT;
    r NUMERIC;
    now_s DOUBLE PRECISION := mx_now();
BEGIN
    UPDATE ledger SET status = p_status, prompt_tokens = p_prompt,
        completion_tokens = p_completion, cached_tokens = p_cached, cost = p_cost,
        finished = now_s, error = p_error
        WHERE id = p_row AND status = 'pending'
        RETURNING key_id, ledger.reserved INTO k, r;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    INSERT INTO key_balance AS b (key_id, spent, reserved) VALUES (k, p_cost, -r)
        ON CONFLICT (key_id) DO UPDATE
        SET spent = b.spent + EXCLUDED.spent, reserved = b.reserved + EXCLUDED.reserved;
    IF p_prompt + p_completion > 0 THEN
        INSERT INTO rate_events AS e (key_id, at, tokens)
            VALUES (k, floor(now_s), p_prompt + p_completion)
            ON CONFLICT (key_id, at) DO UPDATE SET tokens = e.tokens + EXCLUDED.tokens;
    END IF;
    RETURN TRUE;
END $$;
