"""Limits that hold across provider replicas on the shared store (PostgreSQL): a key's RPM and
TPM windows and its spend cap are the database's, so N replicas admit what one would, and
concurrent requests never spend past a cap (each reserves its worst case before it is sent).
Three replicas on one throwaway PostgreSQL in front of the scripted upstream; each test has its
own key. Last, PostgreSQL restarted under load: each request is served or gets a clear 503, and
none is lost from the ledger or billed twice."""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from decimal import Decimal

import httpx
import pytest
from pg_support import SWEEP_BOUND_S, Store, assert_billed_once, replica, store, wait_settled
from provider_fake_upstream import build_fake_upstream
from provider_support import MODEL_ID, serve_in_thread, write_pricing


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Three replicas on one store: {"urls", "store", "upstream"}."""
    tmp = tmp_path_factory.mktemp("shared")
    pricing = write_pricing(tmp / "pricing.json", "tiny")
    with store(tmp) as s, serve_in_thread(build_fake_upstream()) as up:
        with (
            replica(up, pricing, s) as a,
            replica(up, pricing, s) as b,
            replica(up, pricing, s) as c,
        ):
            yield {"urls": [a.url, b.url, c.url], "store": s, "upstream": up}


def chat(url: str, key: str, max_tokens: int = 4, **extra) -> httpx.Response:
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": max_tokens, **extra}  # fmt: skip
    return httpx.post(
        url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )  # fmt: skip


def assert_refusal(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == status and err["metadata"]["reason"] == code and err["message"]


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_rpm_holds_across_replicas(fleet, replicas: int) -> None:
    """RPM 20, 40 requests spread over `replicas` replicas within seconds: 20 admitted, 20
    refused with a 429 and its retry-after, wherever they landed."""
    s: Store = fleet["store"]
    key_id, key = s.create_key(f"rpm{replicas}", "--rpm", "20")
    urls = fleet["urls"][:replicas]
    with cf.ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda i: chat(urls[i % replicas], key), range(40)))
    codes = [r.status_code for r in replies]
    other = [r.text[:300] for r in replies if r.status_code not in (200, 429)]
    assert codes.count(200) == 20 and codes.count(429) == 20, (codes, other)
    for r in replies:
        if r.status_code == 429:
            assert_refusal(r, 429, "rate_limited")
            assert 1 <= int(r.headers["retry-after"]) <= 60
    assert len(s.rows(key_id)) == 20


def test_tpm_holds_across_replicas(fleet) -> None:
    """TPM 50 and requests of 11 tokens (7 prompt + 4 completion, the scripted upstream's
    usage), alternating over two replicas one after another: the fifth takes the key's window
    to 55 tokens and every later one is refused, on either replica. Tokens count once their
    request settles, which on the shared store is just after its reply: each next request
    waits for that."""
    s: Store = fleet["store"]
    key_id, key = s.create_key("tpm", "--tpm", "50")
    urls = fleet["urls"][:2]
    codes = []
    for i in range(10):
        codes.append(chat(urls[i % 2], key).status_code)
        wait_settled(s, key_id, 5)
    assert codes == [200] * 5 + [429] * 5, codes
    assert sum(r[2] + r[3] for r in s.rows(key_id)) == 55


def test_spend_cap_holds_under_concurrent_requests(fleet) -> None:
    """A 0.001 USD cap and 16 concurrent requests over two replicas, each costing about 0.0002
    USD (100 completion tokens at 2 USD/M): requests are admitted only while what is spent plus
    what requests in flight may cost fits, so the key ends at or below its cap; the rest get a
    402 insufficient_credits; the balance admission charges equals the ledger's sum exactly."""
    s: Store = fleet["store"]
    key_id, key = s.create_key("cap", "--limit-usd", "0.001")
    urls = fleet["urls"][:2]
    start = threading.Barrier(16)

    def one(i: int) -> httpx.Response:
        start.wait()
        return chat(urls[i % 2], key, max_tokens=100)

    with cf.ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(one, range(16)))
    # and then one at a time until the cap refuses everything
    replies += [chat(urls[i % 2], key, max_tokens=100) for i in range(6)]
    ok = [r for r in replies if r.status_code == 200]
    refused = [r for r in replies if r.status_code != 200]
    wait_settled(s, key_id, 5)
    total, balance = s.spent_exact(key_id)
    assert total <= Decimal("0.001"), f"spent {total} USD past the 0.001 cap ({len(ok)} served)"
    assert balance == total
    assert len(ok) >= 3 and refused, [r.status_code for r in replies]
    for r in refused:
        assert_refusal(r, 402, "insufficient_credits")
    assert sum(Decimal(str(r.json()["usage"]["cost"])) for r in ok) == total
    if s.shared:
        assert s.query("SELECT reserved FROM key_balance WHERE key_id=?", (key_id,))[0][0] == 0


def test_spend_reads_the_same_from_every_replica(fleet) -> None:
    """What a key has spent, as GET /api/v1/key reports it (`usage`), is the same from every
    replica once its requests have settled, and equals the ledger's sum."""
    s: Store = fleet["store"]
    key_id, key = s.create_key("report", "--limit-usd", "1")
    for i in range(6):
        assert chat(fleet["urls"][i % 3], key).status_code == 200
    wait_settled(s, key_id, 5)
    total, balance = s.spent_exact(key_id)
    h = {"Authorization": f"Bearer {key}"}
    seen = [httpx.get(u + "/api/v1/key", headers=h, timeout=30).json()["data"]
            for u in fleet["urls"]]  # fmt: skip
    assert [d["usage"] for d in seen] == [float(total)] * 3, (seen, total)
    assert [d["limit_remaining"] for d in seen] == [1 - float(total)] * 3
    assert total == balance and total > 0


def test_the_serving_replica_answers_nothing_before_its_reply_settled(fleet) -> None:
    """On the shared store a unary request settles just after its reply is written: on the
    replica that served it, the very next request (the generation lookup, on the same
    connection) finds the row settled with its stats, 20 times in a row."""
    s: Store = fleet["store"]
    key_id, key = s.create_key("settled")
    h = {"Authorization": f"Bearer {key}"}
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    with httpx.Client(base_url=fleet["urls"][0], headers=h, timeout=30) as c:
        for _ in range(20):
            r = c.post("/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
            g = c.get("/api/v1/generation", params={"id": r.json()["id"]})
            assert g.status_code == 200, g.text
            data = g.json()["data"]
            assert data["total_cost"] == r.json()["usage"]["cost"]
            assert data["finish_reason"] is not None and data["streamed"] is False


def test_database_restart_under_load(fleet) -> None:
    """PostgreSQL restarted while two replicas take requests: each is served (200) or refused
    with a 503 store_unavailable, none hangs or fails otherwise; every served request has one
    settled row, and any other row is closed unbilled."""
    s: Store = fleet["store"]
    if not s.shared:
        pytest.skip("the embedded store has no server to restart")
    # rate limits out of the way: 4 clients in a loop pass the default 60/min on a quiet box
    key_id, key = s.create_key("pgrestart", "--rpm", "1000000", "--tpm", "1000000000")
    stop = threading.Event()
    a, b = fleet["urls"][:2]

    def client(url: str) -> list[httpx.Response]:
        out = []
        body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4}  # fmt: skip
        while not stop.is_set():
            out.append(httpx.post(url + "/v1/chat/completions", json=body, timeout=30,
                                  headers={"Authorization": f"Bearer {key}"}))  # fmt: skip
        return out

    with cf.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(client, u) for u in (a, b, a, b)]
        time.sleep(1.0)
        s.cluster.stop("fast")
        time.sleep(1.0)
        s.cluster.start()
        time.sleep(2.0)
        stop.set()
        replies = [r for f in futures for r in f.result()]
    wait_settled(s, key_id, SWEEP_BOUND_S)
    served = [r for r in replies if r.status_code == 200]
    refused = [r for r in replies if r.status_code != 200]
    assert served and refused, (len(served), len(refused))
    for r in refused:
        assert r.status_code == 503 and r.json()["error"]["metadata"]["reason"] == (
            "store_unavailable"
        ), r.text
    rows = {r[0]: r for r in s.rows(key_id)}
    for r in served:
        assert rows.pop(r.json()["id"])[1] == "ok"
    # A 503 whose row committed as the connection died: closed unbilled once the store is back
    assert all(r[1:5] == ("error", 0, 0, 0) for r in rows.values()), rows
    assert_billed_once(s, key_id)
