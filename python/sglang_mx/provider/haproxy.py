"""HAProxy in front of provider replicas (scripts/launch/provider_topology.sh PROVIDERS=N, the
shared-store benchmark): the configuration as data, and a process that serves it.

Each replica is health-checked on GET /metrics every second (answered by the replica itself:
unlike /v1/models it never makes the replica ask the upstream anything): two failures take it
out, one success puts it back. A request is retried on another replica only when its connection
was refused (the replica never saw it): a POST that reached a replica is never sent twice, so it
is never billed twice. Streams pass unbuffered; the server timeout outlasts the provider's
keep-alive frames.

    python -m sglang_mx.provider.haproxy PORT REPLICA_URL...   # prints the configuration"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

CHECK_INTERVAL_MS, CHECK_FALL, CHECK_RISE = 1000, 2, 1


def config(port: int, replicas: list[str], host: str = "127.0.0.1") -> str:
    servers = "\n".join(
        f"    server r{i} {url.removeprefix('http://').rstrip('/')} check"
        for i, url in enumerate(replicas, 1)
    )
    return f"""global
    maxconn 4096

defaults
    mode http
    option http-keep-alive
    timeout connect 3s
    timeout client 330s
    timeout server 330s
    timeout http-keep-alive 60s
    retries 3
    retry-on conn-failure
    option redispatch

frontend provider
    bind {host}:{port}
    default_backend replicas

backend replicas
    balance leastconn
    option httpchk GET /metrics
    http-check expect status 200
    default-server inter {CHECK_INTERVAL_MS} fall {CHECK_FALL} rise {CHECK_RISE}
{servers}
"""


@contextmanager
def haproxy_process(port: int, replicas: list[str]) -> Iterator[str]:
    """HAProxy on 127.0.0.1:port in front of `replicas` until the block exits; yields its URL
    once a request through it is answered."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    cfg = Path(tempfile.mkstemp(prefix="sglang-mx-haproxy-", suffix=".cfg")[1])
    cfg.write_text(config(port, replicas))
    proc = subprocess.Popen([binary, "-f", str(cfg), "-db"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"haproxy exited ({proc.returncode}); config {cfg}")
            try:
                if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("haproxy did not route in 30 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        cfg.unlink(missing_ok=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m sglang_mx.provider.haproxy PORT REPLICA_URL...")
    print(config(int(sys.argv[1]), sys.argv[2:]), end="")
