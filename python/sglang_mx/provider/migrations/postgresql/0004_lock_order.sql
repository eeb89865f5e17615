-- One lock order for a key's rows on the request path: its rate bucket (rate_events), then its
-- balance (key_balance). Admission (mx_admit, then mx_open) already took them in that order;
-- settlement (mx_finish) took the balance first, so one replica's settlement and another's
-- admission of the same key could each hold the row the other waits for, and PostgreSQL broke
-- the deadlock by failing one (a 503 store_unavailable). Same statements, reordered.
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
    IF p_prompt + p_completion > 0 THEN
        INSERT INTO rate_events AS e (key_id, at, tokens)
            VALUES (k, floor(now_s), p_prompt + p_completion)
            ON CONFLICT (key_id, at) DO UPDATE SET tokens = e.tokens + EXCLUDED.tokens;
    END IF;
    INSERT INTO key_balance AS b (key_id, spent, reserved) VALUES (k, p_cost, -r)
        ON CONFLICT (key_id) DO UPDATE
        SET spent = b.spent + EXCLUDED.spent, reserved = b.reserved + EXCLUDED.reserved;
    RETURN TRUE;
END $$;
