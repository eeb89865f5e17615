"""The shared store's request-path call (`PgDatabase.call`: a prepared statement run by libpq,
parameters and rows as text): values arrive as they were sent whatever their characters, an SQL
error stays an SQL error on a usable connection, and a restarted server is a StoreUnavailable
once, then the next call reconnects and prepares its statement again. One throwaway
PostgreSQL."""

from __future__ import annotations

from decimal import Decimal

import psycopg
import pytest
from pg_support import cluster, new_database
from sglang_mx.provider.errors import StoreUnavailable
from sglang_mx.provider.pg import PgDatabase

HOSTILE = ['a"b', "c\\d", "e,f", "{g}", "NULL", "", " h ", "ünï\u2028", "'; DROP TABLE x; --"]


@pytest.fixture(scope="module")
def pg():
    with cluster() as c:
        yield c


def test_text_parameters_round_trip(pg) -> None:
    db = PgDatabase(new_database(pg))
    try:
        rows = db.call("unnest_1", "SELECT x, $2::int, $3::numeric, $4::float8, $5::text, $6::bool "
                       "FROM unnest($1::text[]) WITH ORDINALITY AS u(x, i) ORDER BY i",
                       (HOSTILE, -7, Decimal("0.0000045"), 1e-05, None, False))  # fmt: skip
        assert [r[0] for r in rows] == HOSTILE
        assert rows[0][1:] == ("-7", "0.0000045", "1e-05", None, "f")
        again = db.call("unnest_1", "SELECT 1", (["x"], 1, 1, 1.5, "y", True))  # prepared once
        assert again == [("x", "1", "1", "1.5", "y", "t")]
    finally:
        db.close()


def test_an_sql_error_leaves_the_connection_usable(pg) -> None:
    db = PgDatabase(new_database(pg))
    try:
        with pytest.raises(psycopg.errors.DivisionByZero):
            db.call("div_1", "SELECT 1 / $1::int", (0,))
        assert db.call("div_1", "SELECT 1 / $1::int", (1,)) == [("1",)]
    finally:
        db.close()


def test_a_restarted_server_is_unavailable_once_then_served(pg) -> None:
    db = PgDatabase(new_database(pg))
    try:
        assert db.call("one_1", "SELECT $1::int + 1", (1,)) == [("2",)]
        pg.stop("fast")
        pg.start()
        with pytest.raises(StoreUnavailable):
            db.call("one_1", "SELECT $1::int + 1", (1,))
        assert db.call("one_1", "SELECT $1::int + 1", (2,)) == [("3",)]  # a new connection
    finally:
        db.close()


def test_a_rolled_back_call_runs_again(pg) -> None:
    """A call PostgreSQL fails as a deadlock victim (SQLSTATE 40P01: it changed nothing) is run
    again, not turned into a 503; one that fails so every time is a 503 after the retries."""
    url = new_database(pg)
    db = PgDatabase(url)
    try:
        db.executescript(
            "CREATE SEQUENCE tries; CREATE FUNCTION victim(fail_until INT) RETURNS BIGINT "
            "LANGUAGE plpgsql AS $$ DECLARE n BIGINT := nextval('tries'); BEGIN "
            "IF n <= fail_until THEN RAISE EXCEPTION 'planted' USING ERRCODE = '40P01'; END IF; "
            "RETURN n; END $$;"
        )
        assert db.call("victim_1", "SELECT victim($1)", (2,)) == [("3",)]  # 2 rolled back
        with pytest.raises(StoreUnavailable, match="planted"):
            db.call("victim_1", "SELECT victim($1)", (100,))
    finally:
        db.close()
