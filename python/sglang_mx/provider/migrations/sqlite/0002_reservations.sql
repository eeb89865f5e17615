-- In-flight spend reservations: each pending row holds its request's worst-case cost; a key's
-- balance is what its finished rows cost (spent) and what its pending rows hold (reserved).
ALTER TABLE ledger ADD COLUMN reserved REAL NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN replica TEXT;
CREATE TABLE key_balance (
    key_id TEXT PRIMARY KEY,
    spent REAL NOT NULL DEFAULT 0,
    reserved REAL NOT NULL DEFAULT 0
);
INSERT INTO key_balance (key_id, spent)
    SELECT key_id, SUM(cost) FROM ledger WHERE status <> 'pending' GROUP BY key_id;
