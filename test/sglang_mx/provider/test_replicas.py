"""No request lost or billed twice when a replica dies: each provider replica holds a lease on the
shared store, a SIGKILLed replica's in-flight rows are settled by another replica once its lease
lapses (as `aborted`, billed for the tokens last recorded: with --ledger-flush-tokens 1, every
token the client was sent but one sent as the kill came, before its progress write), and a
restarting replica leaves the live ones' rows alone. Replicas in front of the scripted upstream,
whose SLOW streams send a token every 0.5 s. (A PostgreSQL restart under load:
test_shared_store.py.)"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from pg_support import SWEEP_BOUND_S, Store, assert_billed_once, replica, store, wait_settled
from provider_fake_upstream import build_fake_upstream
from provider_support import MODEL_ID, expected_cost, serve_in_thread, write_pricing


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replicas")
    pricing = write_pricing(tmp / "pricing.json", "tiny")
    with store(tmp) as s, serve_in_thread(build_fake_upstream()) as up:
        yield {"store": s, "upstream": up, "pricing": pricing}


class Stream(threading.Thread):
    """One streamed chat request: its ledger row id, the content chunks it received, how it
    ended."""

    def __init__(self, url: str, key: str, tokens: int) -> None:
        super().__init__(daemon=True)
        self.url, self.key, self.tokens = url, key, tokens
        self.rid: str | None = None
        self.chunks = 0
        self.done = False  # the stream reached [DONE]
        self.first = threading.Event()

    def run(self) -> None:
        body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "SLOW"}],
                "max_tokens": self.tokens, "stream": True}  # fmt: skip
        try:
            with httpx.stream("POST", self.url + "/v1/chat/completions", json=body,
                              headers={"Authorization": f"Bearer {self.key}"},
                              timeout=30) as r:  # fmt: skip
                self.rid = r.headers.get("x-request-id")
                for line in r.iter_lines():
                    if line == "data: [DONE]":
                        self.done = True
                    elif line.startswith("data:") and '"content"' in line:
                        self.chunks += 1
                        self.first.set()
        except httpx.HTTPError:
            pass  # its replica died
        finally:
            self.first.set()


def start_streams(urls: list[str], key: str, n: int, tokens: int) -> list[Stream]:
    streams = [Stream(urls[i % len(urls)], key, tokens) for i in range(n)]
    for t in streams:
        t.start()
    for t in streams:
        assert t.first.wait(20)
    assert all(t.chunks >= 1 for t in streams), [t.chunks for t in streams]
    return streams


def test_killed_replica_rows_settled_once_and_restart_spares_the_live_one(env) -> None:
    """16 streams over replicas A and B; A SIGKILLed mid-stream and started again on its port
    while B streams on. A's start-up settles none of B's rows; every request ends with one row,
    none pending once B's streams end and SWEEP_BOUND_S has passed since the kill; A's rows
    billed for what their clients got, B's in full."""
    s: Store = env["store"]
    key_id, key = s.create_key("kill")
    up, pricing = env["upstream"], env["pricing"]
    tokens = 20  # 10 s of stream: B's outlast A's restart
    with replica(up, pricing, s) as b:
        with replica(up, pricing, s) as a:
            streams = start_streams([a.url, b.url], key, 16, tokens)
            a.kill()
        killed_at = time.monotonic()
        with replica(up, pricing, s, port=int(a.url.rsplit(":", 1)[1])):
            on_b = {t.rid for t in streams if t.url == b.url}
            assert not any(t.done for t in streams), "B's streams ended before A restarted"
            pending = {r[0] for r in s.rows(key_id) if r[1] == "pending"}
            assert on_b <= pending, "the restarted replica settled rows the live one serves"
            settled_s = wait_settled(s, key_id, SWEEP_BOUND_S + tokens / 2)
            for t in streams:
                t.join(30)
    rows = {r[0]: r for r in s.rows(key_id)}
    assert sorted(rows) == sorted(t.rid for t in streams), "a request lost or doubled"
    for t in streams:
        rid, status, prompt, completion, cost, error = rows[t.rid]
        if t.url == b.url:
            assert (status, completion, t.done) == ("ok", tokens, True)
        else:
            assert status == "aborted" and "died" in error and not t.done, rows[t.rid]
            # the tokens last recorded: at most ledger_flush_tokens (1) behind the client, the
            # chunk sent before its progress write when the kill came
            assert t.chunks - 1 <= completion <= t.chunks, (completion, t.chunks)
        # the scripted upstream's usage caches 3 prompt tokens; a row killed before its first
        # progress write recorded no usage at all (0 tokens, 0 cost)
        cached = 3 if prompt else 0
        assert float(cost) == pytest.approx(expected_cost(prompt, completion, cached), rel=1e-12)
    on_a = [rows[t.rid][3] for t in streams if t.url != b.url]
    assert sum(on_a) >= 1, "no progress of the killed replica's streams was billed"
    assert_billed_once(s, key_id)
    after = time.monotonic() - killed_at - settled_s
    print(f"every row settled {after:.1f} + {settled_s:.1f} s after the kill")
