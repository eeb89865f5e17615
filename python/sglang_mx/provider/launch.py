"""Start the provider and the gateway (smg) as their own processes (tests, benchmarks, recipes):
each a context manager that waits until the process serves and kills it on exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(cmd: list[str], name: str) -> tuple[subprocess.Popen, Path]:
    """Start cmd in its own session, output to a log file (a pipe nobody reads would fill and
    block the child)."""
    log = Path(tempfile.mkstemp(prefix=f"sglang-mx-{name}-", suffix=".log")[1])
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def _tail(log: Path, n: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _wait_until_ready(
    proc: subprocess.Popen,
    log: Path,
    name: str,
    ready: Callable[[], bool],
    timeout_s: float,
    poll_s: float,
) -> None:
    """Poll `ready()` until it holds; fail naming the log if the process exits first or
    `timeout_s` passes (an HTTP error counts as not ready yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited; log {log}:\n{_tail(log)}")
        try:
            if ready():
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(_NOT_READY[name].format(s=int(timeout_s)))
        time.sleep(poll_s)


_NOT_READY = {
    "provider": "provider did not start in {s} s",
    "router": "router did not become healthy in {s} s",
}


@dataclass(frozen=True)
class RunningProvider:
    url: str
    proc: subprocess.Popen

    def kill(self) -> None:
        """SIGKILL: a crash, no clean-up of any kind."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@contextmanager
def provider_process(
    upstream: str, pricing: Path, db: Path, *extra: str, port: int | None = None
) -> Iterator[RunningProvider]:
    """Run `sglang-mx provider` as its own process (start_new_session: killable as a group)."""
    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "sglang_mx.provider",
        "provider",
        "--upstream",
        upstream,
        "--pricing",
        str(pricing),
        "--db",
        str(db),
        "--port",
        str(port),
        *extra,
    ]
    proc, log = _spawn(cmd, "provider")
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(
            proc,
            log,
            "provider",
            lambda: httpx.get(url + "/v1/models", timeout=1).status_code == 200,
            60,
            0.2,
        )
        yield RunningProvider(url, proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


# The gateway: SGLang Model Gateway (PyPI `smg`, formerly sglang-router), its launcher run by
# this interpreter so it is the venv's.
ROUTER_CMD = (sys.executable, "-m", "smg", "launch")


@contextmanager
def router_process(
    worker_urls: list[str], policy: str = "cache_aware", extra_args: tuple[str, ...] = ()
) -> Iterator[str]:
    """smg in front of the workers; yields its base URL once it routes to every one of them."""
    args = ["--policy", policy, "--worker-urls", *worker_urls, *extra_args]
    with _router(args, list(worker_urls)) as url:
        yield url


@contextmanager
def pd_router_process(
    prefill: list[tuple[str, int]], decode: list[str], extra_args: tuple[str, ...] = ()
) -> Iterator[str]:
    """smg in PD mode: each request goes to a prefill server (URL, KV bootstrap port) and a
    decode server; yields its base URL once it routes."""
    args = ["--pd-disaggregation"]
    for url, bootstrap_port in prefill:
        args += ["--prefill", url, str(bootstrap_port)]
    for url in decode:
        args += ["--decode", url]
    with _router([*args, *extra_args], [url for url, _ in prefill] + list(decode)) as url:
        yield url


def router_flags() -> list[str]:
    """The health and retry flags every gateway we start gets, in the suite and in
    scripts/launch/{provider,pd}_topology.sh (which print them with `python -m
    sglang_mx.provider.launch router-flags`). smg's own defaults check health every 60 s."""
    return ["--health-check-interval-secs", str(HEALTH_INTERVAL_S),
            # A busy CPU worker answers /health slowly; only a dead one should be dropped.
            "--health-check-timeout-secs", "20",
            "--health-failure-threshold", str(HEALTH_FAILURES),
            # A request that cannot reach its worker is retried until the dead worker is out
            # (RETRY_BACKOFF_MS below).
            "--retry-max-retries", str(len(RETRY_BACKOFF_MS)),
            "--retry-initial-backoff-ms", str(RETRY_BACKOFF_MS[0]),
            "--retry-backoff-multiplier", "1.5", "--retry-max-backoff-ms", "2000",
            # smg's default is 1800 s; a request still running after 300 s on this box is
            # stuck (the unscaled 20k run passes its own, longer one).
            "--request-timeout-secs", "300"]  # fmt: skip


HEALTH_INTERVAL_S, HEALTH_FAILURES = 2, 3
# The gateway's retry delays (100 ms x 1.5 per retry, at most 2 s; +-20% jitter): 8.9 s in all.
# A killed worker leaves the rotation after HEALTH_FAILURES failed checks HEALTH_INTERVAL_S
# apart (4-6 s), once a transport failure finds it silent for --worker-stall-secs (smg 1.13,
# 2 s), or once 10 failed requests open its circuit. Until then the cache-aware policy can pick
# it for every attempt: with sglang-router 0.3.2's default delays (50 ms x 1.5, five retries,
# 0.66 s; smg's are the same) a request sent 1-2 s after the kill failed all six attempts and
# the provider answered 502 (CI, 2026-12-03: 2 of 6 follow-ups). The delays must outlast the
# detection; re-measured on smg 1.13 in docs/scale-out.md "smg's settings".
RETRY_BACKOFF_MS = [min(2000, round(100 * 1.5**i)) for i in range(10)]

# smg flags whose job another layer of our stack owns: refused with the layer that does it, so a
# user who reaches for them learns where the feature is instead of getting a gateway that
# rejects the provider's own calls (docs/scale-out.md "Layers").
_PROVIDER_OWNS = "the provider owns it (sglang-mx provider: keys, per-key limits, billing)"
_WORKER_OWNS = (
    "SGLang parses it on the worker in HTTP mode (sglang-mx serve --reasoning-parser / "
    "--tool-call-parser); the provider bills the parsed output"
)
_NOT_SERVED = (
    "the provider serves /v1/chat/completions, /v1/completions and the native routes, not "
    "smg's Responses / conversation APIs that store history"
)
REFUSED_ROUTER_FLAGS = {
    "--api-key": _PROVIDER_OWNS,
    "--tenant-api-key": _PROVIDER_OWNS,
    "--trust-tenant-header": _PROVIDER_OWNS,
    "--tenant-rate-limit-enabled": _PROVIDER_OWNS,
    "--tenant-rate-limit-config": _PROVIDER_OWNS,
    "--rate-limit-tokens-per-second": _PROVIDER_OWNS,
    "--reasoning-parser": _WORKER_OWNS,
    "--tool-call-parser": _WORKER_OWNS,
    "--history-backend": _NOT_SERVED,
    "--mcp-config-path": _NOT_SERVED,
}


def refused_router_flag(args: list[str] | tuple[str, ...]) -> str | None:
    """Why our stack refuses one of `args` (an smg flag whose job another layer owns), or None."""
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in REFUSED_ROUTER_FLAGS:
            return f"smg {flag} is not used in this stack: {REFUSED_ROUTER_FLAGS[flag]}"
    return None


@contextmanager
def _router(worker_args: list[str], workers: list[str]) -> Iterator[str]:
    if why := refused_router_flag(worker_args):
        raise ValueError(why)
    # smg registers a worker given on its command line only if that worker's /health answers
    # 200 when smg starts; SGLang answers 503 until its own warm-up request returns, which on a
    # busy box can be after it already generates. A worker refused then is retried by smg's
    # registration workflow but was never seen back (smg 1.13, 2026-12-06: the supervised
    # worker of test_router_topology missing from GET /workers a minute later, every stream
    # on the other), so start smg only once every worker is ready.
    wait_workers_ready(workers)
    port = free_port()
    cmd = [*ROUTER_CMD, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warn",
           *router_flags(),
           # Its metrics listener defaults to port 29000: a second gateway on the box would
           # fail to start ("Address already in use").
           "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
           *worker_args]  # fmt: skip
    proc, log = _spawn(cmd, "router")
    url = f"http://127.0.0.1:{port}"
    try:
        # /health answers before the gateway has seen a healthy worker; wait until it actually
        # routes a one-token request.
        probe = {"text": "a", "sampling_params": {"max_new_tokens": 1}}
        _wait_until_ready(
            proc,
            log,
            "router",
            lambda: (
                httpx.post(url + "/generate", json=probe, timeout=60).status_code == 200
                and not _unregistered(url, workers)
            ),
            120,
            0.3,
        )
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def wait_workers_ready(workers: list[str], timeout_s: float = 300) -> None:
    """Until each worker's /health is 200 (SGLang: loaded and warmed up); a TimeoutError
    naming the ones that are not."""
    deadline = time.monotonic() + timeout_s
    waiting = list(workers)
    while waiting:
        waiting = [w for w in waiting if not _healthy(w)]
        if waiting and time.monotonic() > deadline:
            raise TimeoutError(f"workers not ready after {int(timeout_s)} s: {waiting}")
        if waiting:
            time.sleep(0.25)


def _healthy(worker: str) -> bool:
    try:
        return httpx.get(worker + "/health", timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


def _unregistered(router: str, workers: list[str]) -> list[str]:
    """The workers smg does not list as healthy (GET /workers)."""
    listed = httpx.get(router + "/workers", timeout=10).json().get("workers", [])
    healthy = {w.get("url", "").rstrip("/") for w in listed if w.get("is_healthy")}
    return [w for w in workers if w.rstrip("/") not in healthy]


def _main(argv: list[str]) -> None:
    """`router-flags`: the flags above, one line; `check-router-args ARGS...`: exit 2 naming
    the first refused smg flag (the launch scripts run it on what the user passes)."""
    if argv[:1] == ["router-flags"]:
        print(" ".join(router_flags()))
    elif argv[:1] == ["check-router-args"]:
        if why := refused_router_flag(argv[1:]):
            print(why, file=sys.stderr)
            sys.exit(2)
    else:
        sys.exit("usage: python -m sglang_mx.provider.launch router-flags | check-router-args ARGS")


if __name__ == "__main__":
    _main(sys.argv[1:])
