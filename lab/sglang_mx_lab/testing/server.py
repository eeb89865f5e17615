"""Start a real SGLang server process (with the sglang_mx plugin) and wait until it serves.

Used by the test suite and benchmarks; the server is `python -m sglang.launch_server`, exactly
what a user runs, on a free loopback port. Logs go to a file whose path is kept on the handle so
a failing start shows its own reason.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from sglang_mx_lab.testing.liveness import wait_generating

STARTUP_TIMEOUT_S = 300.0
# KV pool (tokens) for every server started here when this is set and the caller names none: the
# suite sets it (test/conftest.py), so its many concurrent servers do not each hold the
# platform's 131,072-token pool; the lab's validators, run by hand, leave it unset.
POOL_ENV = "SGLANG_MX_TEST_POOL_TOKENS"
_EXC_LINE = re.compile(r"^(\w+(?:Error|Exception|Interrupt)): (.*)$")


# Ports we hand out lie under the kernel's ephemeral range and above SGLang's own picks
# (22000-29999, sglang.srt.utils.network.get_free_port_below_ephemeral): a port taken with
# bind(0) is ephemeral, and between our check and the server's bind another process's bind(0)
# or outgoing connection (Mooncake's transfer engine, a zmq socket) could take it; seen on
# 2026-12-02, a PD side's HTTP port lost that way, so the side never served.
_PORT_LOW = 30000
_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port free now that no bind(0) can be given before its user binds it (under
    the ephemeral range), never handed out twice by this process; bind(0) only where that range
    is too small to pick from."""
    high = _ephemeral_low()
    if high - _PORT_LOW >= 256:
        for port in random.sample(range(_PORT_LOW, high), 64):
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServerProcess:
    base_url: str
    proc: subprocess.Popen
    log_path: Path
    startup_s: float

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0, wait: bool = True) -> None:
        """SIGTERM to the server's process group, then SIGKILL after `timeout`. SGLang takes
        about 5 s to shut down even idle; with wait=False that happens on a (non-daemon) thread,
        so a test fixture's teardown need not sit through it."""
        if self.proc.poll() is not None:
            return
        # The server's process group holds the scheduler and detokenizer children.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, 15)
        if wait:
            self._reap(timeout)
        else:
            threading.Thread(target=self._reap, args=(timeout,), name="stop-server").start()

    def _reap(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=timeout)


# What SGLang 0.5.23's scheduler process logs as it sets up a model, in order: its process groups
# (srt/distributed/bootstrap.py), then the weights (srt/model_executor/model_runner.py). A log
# without them is one where no worker began to initialise a model.
WORKER_START_LINES = ("Init parallel begin.", "Load weight begin")


def default_serve_args() -> tuple[str, list[str]]:
    """The model and SGLang arguments `sglang-mx serve` uses when given none (read from the CLI
    itself, so a test server on the default model is what a user gets)."""
    from sglang_mx.cli.serve import build_command

    ns = argparse.Namespace(
        model_path=None, host="127.0.0.1", port=0, no_cache_report=False, extra=[]
    )
    cmd = build_command(ns)
    return cmd[cmd.index("--model-path") + 1], cmd[cmd.index("--port") + 2 :]


def server_command(model_path: str, port: int, extra_args: Sequence[str] = ()) -> list[str]:
    pool = os.environ.get(POOL_ENV)
    if pool and "--max-total-tokens" not in extra_args:
        extra_args = [*extra_args, "--max-total-tokens", pool]
    return [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(model_path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra_args,
    ]


def spawn_server(
    model_path: str,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> ServerProcess:
    """Start the server process and return at once (`wait_ready` waits for it to serve)."""
    port = port or free_port()
    log = Path(tempfile.mkstemp(prefix=f"sglang-{port}-", suffix=".log")[1])
    child_env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    with log.open("wb") as f:
        proc = subprocess.Popen(
            server_command(model_path, port, extra_args),
            stdout=f,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,
        )
    return ServerProcess(f"http://127.0.0.1:{port}", proc, log, 0.0)


def start_server(
    model_path: str,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    port: int | None = None,
    timeout: float = STARTUP_TIMEOUT_S,
) -> ServerProcess:
    return start_servers([(model_path, extra_args, env, port)], timeout)[0]


def start_servers(
    specs: Sequence[tuple[str, Sequence[str], dict[str, str] | None, int | None]],
    timeout: float = STARTUP_TIMEOUT_S,
) -> list[ServerProcess]:
    """Several servers started side by side (model, args, env, port each): their cold starts
    overlap; returns once all serve, or stops them all and raises the first failure."""
    t0 = time.monotonic()
    handles = [spawn_server(*spec) for spec in specs]
    try:
        for handle in handles:
            wait_ready(handle, timeout - (time.monotonic() - t0))
            handle.startup_s = time.monotonic() - t0
    except BaseException:
        for handle in handles:
            handle.stop()
        raise
    return handles


def wait_ready(handle: ServerProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if handle.proc.poll() is not None:
            raise RuntimeError(
                f"SGLang server exited with code {handle.proc.returncode} before it was ready; "
                f"log {handle.log_path}:\n{handle.log_tail()}"
            )
        try:
            # /health turns 200 only after SGLang's own warm-up request; then a 1-token
            # generate proves the scheduler serves.
            if httpx.get(f"{handle.base_url}/health", timeout=30).status_code == 200:
                r = httpx.post(
                    f"{handle.base_url}/generate",
                    json={"text": "a", "sampling_params": {"max_new_tokens": 1}},
                    timeout=60,
                )
                if r.status_code == 200:
                    return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise TimeoutError(
        f"SGLang server not ready after {timeout:.0f}s; log {handle.log_path}:\n{handle.log_tail()}"
    )


@contextlib.contextmanager
def launch_server(
    model_path: str,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> Iterator[str]:
    """Context manager yielding the base URL of a live server; stops it on exit."""
    handle = start_server(model_path, extra_args, env=env, port=port)
    try:
        yield handle.base_url
    finally:
        handle.stop()


def last_exception(log_path: Path, since: int) -> str:
    """The last `SomeError: message` line a log gained after byte offset `since`."""
    text = log_path.read_bytes()[since:].decode(errors="replace")
    found = [m.group(0) for line in text.splitlines() if (m := _EXC_LINE.match(line.strip()))]
    return found[-1][:300] if found else "(no exception logged)"


class SupervisedServer:
    """An SGLang server under a Supervisor thread (what `sglang-mx serve --restart on-failure`
    runs): restarted whenever its process tree exits. The log keeps every run and the
    supervisor's lines naming each exit's cause."""

    def __init__(self, model_path: str, extra_args: Sequence[str], env: dict[str, str]) -> None:
        from sglang_mx.supervisor import RestartPolicy, Supervisor

        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        log = tempfile.mkstemp(prefix=f"sglang-supervised-{self.port}-", suffix=".log")[1]
        self.log_path = Path(log)
        cmd = server_command(model_path, self.port, list(extra_args))
        child_env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **env}
        self._log = self.log_path.open("ab")
        self.sup = Supervisor(
            cmd,
            RestartPolicy(backoff_s=0.5, max_backoff_s=2.0),
            log=self._note,
            env=child_env,
            stdout=self._log,
        )
        self._thread = threading.Thread(target=self.sup.run, daemon=True)
        self._thread.start()

    def _note(self, message: str) -> None:
        self._log.write(f"[supervisor] {message}\n".encode())
        self._log.flush()

    def wait_healthy(
        self, timeout: float = 300.0, probe: Callable[[str, float], float] = wait_generating
    ) -> float:
        """Seconds until `probe` (default: the server generates a token, polled every 0.25 s)
        passes; one side of PD answers its own probe
        (sglang_mx_lab.testing.pd_servers.wait_pd_serving)."""
        try:
            return probe(self.base_url, timeout)
        except TimeoutError as e:
            raise TimeoutError(f"{e}; log {self.log_path}") from None

    def last_exception(self, since: int) -> str:
        return last_exception(self.log_path, since)

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def close(self) -> None:
        self.sup.stop()
        self._thread.join(timeout=60)
        self._log.close()
