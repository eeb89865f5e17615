-- The request path's writes, one round trip each and atomic: admission against the key's
-- shared one-minute window, opening a request's rows with its spend reservation, settling a
-- row. A key's admissions serialize on a transaction-scoped advisory lock; its reservations
-- and settlements on its key_balance row.
CREATE FUNCTION mx_now() RETURNS DOUBLE PRECISION
    LANGUAGE sql VOLATILE AS $$ SELECT extract(epoch FROM clock_timestamp())::double precision $$;

-- 0: admitted (p_n requests recorded now); else the seconds until it would be (at least 1).
CREATE FUNCTION mx_admit(p_key TEXT, p_rpm INTEGER, p_tpm BIGINT, p_n INTEGER)
RETURNS DOUBLE PRECISION LANGUAGE plpgsql AS $$
DECLARE
    now_s DOUBLE PRECISION;
    reqs BIGINT;
    toks BIGINT;
    t DOUBLE PRECISION;
    wait DOUBLE PRECISION := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 57));
    now_s := mx_now();
    DELETE FROM rate_events WHERE key_id = p_key AND at <= now_s - 60;
    SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0) INTO reqs, toks
        FROM rate_events WHERE key_id = p_key;
    IF reqs + p_n > p_rpm THEN
        -- the admission after which enough requests have left the window
        SELECT s.at INTO t FROM (
            SELECT at, SUM(requests) OVER (ORDER BY at, requests) AS cum
            FROM rate_events WHERE key_id = p_key AND requests > 0) s
        WHERE s.cum >= reqs + p_n - p_rpm ORDER BY s.at LIMIT 1;
        wait := t + 60 - now_s;
    END IF;
    IF toks >= p_tpm THEN
        -- tokens are charged when a request settles: wait until the sum drops below tpm
        SELECT s.at INTO t FROM (
            SELECT at, SUM(tokens) OVER (ORDER BY at, tokens) AS cum
            FROM rate_events WHERE key_id = p_key AND tokens > 0) s
        WHERE toks - s.cum < p_tpm ORDER BY s.at LIMIT 1;
        wait := GREATEST(wait, t + 60 - now_s);
    END IF;
    IF wait > 0 THEN
        RETURN GREATEST(1, CEIL(wait));
    END IF;
    INSERT INTO rate_events (key_id, at, requests) VALUES (p_key, now_s, p_n);
    RETURN 0;
END $$;

-- Reserve p_reserve per row against the key's cap (none: p_limit NULL) and insert the rows
-- pending; ok false (nothing written) when spent + reserved + this request's worst case would
-- pass the cap.
CREATE FUNCTION mx_open(
    p_rows TEXT[], p_key TEXT, p_model TEXT, p_replica TEXT, p_reserve NUMERIC, p_limit NUMERIC,
    OUT ok BOOLEAN, OUT spent NUMERIC, OUT reserved NUMERIC)
LANGUAGE plpgsql AS $$
DECLARE
    total NUMERIC := p_reserve * cardinality(p_rows);
BEGIN
    INSERT INTO key_balance (key_id) VALUES (p_key) ON CONFLICT (key_id) DO NOTHING;
    UPDATE key_balance b SET reserved = b.reserved + total
        WHERE b.key_id = p_key AND (p_limit IS NULL OR b.spent + b.reserved + total <= p_limit)
        RETURNING b.spent, b.reserved - total INTO spent, reserved;
    ok := FOUND;
    IF NOT ok THEN
        SELECT b.spent, b.reserved INTO spent, reserved FROM key_balance b WHERE b.key_id = p_key;
        RETURN;
    END IF;
    INSERT INTO ledger (id, key_id, model, status, created, replica, reserved)
        SELECT r, p_key, p_model, 'pending', mx_now(), p_replica, p_reserve FROM unnest(p_rows) r;
END $$;

-- Settle a pending row once: its cost moves into the key's spend, its reservation is released
-- and its tokens enter the key's token window. false: the row was already settled (by this
-- replica, or by a sweep after this replica's lease lapsed): nothing changes.
CREATE FUNCTION mx_finish(
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
        INSERT INTO rate_events (key_id, at, tokens) VALUES (k, now_s, p_prompt + p_completion);
    END IF;
    RETURN TRUE;
END $$;
