"""scripts/launch/provider_front.sh, the provider end of provider_topology.sh and pd_topology.sh,
with PROVIDERS=2 DB=postgres: a throwaway PostgreSQL, a first key and the database URL printed,
two replicas on it behind HAProxy on PROVIDER_PORT. Driven as the scripts drive it (sourced,
then start_provider), in front of the scripted upstream instead of a router of SGLang workers:
a key with RPM 20 gets 20 of 40 requests through the load balancer, served by both replicas;
stopping the script stops everything it started, the database too."""

from __future__ import annotations

import concurrent.futures as cf
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
from provider_fake_upstream import build_fake_upstream
from provider_support import MODEL_ID, serve_in_thread, write_pricing
from sglang_mx.provider.keys import KeyStore

FRONT = Path(__file__).parents[3] / "scripts" / "launch" / "provider_front.sh"
READY_S = 180  # the script's database, key and two replicas (seconds on a quiet box)


def free_run(n: int) -> int:
    """A port p with p..p+n-1 all free on loopback."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for p in range(base, base + n):
                socks.append(socket.socket())
                socks[-1].bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


def test_two_replicas_on_postgres_behind_haproxy(tmp_path) -> None:
    pricing = write_pricing(tmp_path / "pricing.json", "tiny")
    pg_dir = Path(tempfile.gettempdir()) / f"sglang-mx-test-pg-{uuid.uuid4().hex[:8]}"
    port = free_run(3)
    with serve_in_thread(build_fake_upstream()) as up:
        env = {**os.environ, "PY": sys.executable, "HOST": "127.0.0.1", "PRICING": str(pricing),
               "ROUTER_PORT": up.rsplit(":", 1)[1], "PROVIDER_PORT": str(port), "DB": "postgres",
               "PROVIDERS": "2", "PG_DIR": str(pg_dir)}  # fmt: skip
        script = (f"source {FRONT}; pids=(); trap 'kill \"${{pids[@]}}\" 2>/dev/null; wait' "
                  "EXIT INT TERM; start_provider; wait")  # fmt: skip
        proc = subprocess.Popen(["bash", "-c", script], env=env, cwd=tmp_path, text=True,
                                stdout=subprocess.PIPE, start_new_session=True)  # fmt: skip
        try:
            lines: queue.Queue[str] = queue.Queue()
            threading.Thread(
                target=lambda: [lines.put(x) for x in proc.stdout], daemon=True
            ).start()
            printed, deadline = {}, time.monotonic() + READY_S
            while "provider http" not in printed:
                try:
                    line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    logs = {f.name: f.read_text()[-500:] for f in tmp_path.glob("*.log")}
                    raise AssertionError(f"not serving in {READY_S} s: {printed} {logs}") from None
                name, _, value = line.strip().partition(": ")
                printed[name if not line.startswith("provider http") else "provider http"] = value
            assert printed.get("key", "").startswith("sk-mx-"), printed
            db = printed["db"]
            assert db.startswith("postgresql://"), printed
            lb = f"http://127.0.0.1:{port}"
            keys = KeyStore(db)
            key_id, key = (lambda k: (k[0].id, k[1]))(keys.create("rpm20", rpm=20))

            def chat(_: int) -> int:
                body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}],
                        "max_tokens": 4}  # fmt: skip
                h = {"Authorization": f"Bearer {key}"}
                return httpx.post(lb + "/v1/chat/completions", json=body, headers=h,
                                  timeout=30).status_code  # fmt: skip

            with cf.ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(chat, range(40)))
            assert codes.count(200) == 20 and codes.count(429) == 20, codes
            with psycopg.connect(db) as conn:
                served_by = conn.execute(
                    "SELECT COUNT(DISTINCT replica) FROM ledger WHERE key_id=%s", (key_id,)
                ).fetchone()[0]
            assert served_by == 2, "the load balancer sent every request to one replica"
            keys.db.close()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
            stopped = not (pg_dir / "data" / "postmaster.pid").exists()
            shutil.rmtree(pg_dir, ignore_errors=True)
    assert stopped, "the script left PostgreSQL running"
