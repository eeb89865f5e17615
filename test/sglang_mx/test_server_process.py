"""ServerProcess.stop (sglang_mx.testing.server): SIGTERM to the server's process group, SIGKILL
after the timeout; with wait=False the caller does not sit through the shutdown (SGLang takes
about 5 s even idle), and the process is still reaped. A plain Python child stands in for the
server: what is tested is the signalling, not SGLang."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sglang_mx.testing.server import ServerProcess

# Drains for a second on SIGTERM, as SGLang does (longer), then exits 0.
DRAINS = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(1.0), sys.exit(0)))\n"
    "print('up', flush=True)\n"
    "time.sleep(120)\n"
)
IGNORES_TERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('up', flush=True)\n"
    "time.sleep(120)\n"
)


def _spawn(code: str, tmp_path: Path) -> ServerProcess:
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout.readline().strip() == "up"  # its handler is installed
    return ServerProcess("http://127.0.0.1:0", proc, tmp_path / "log", 0.0)


def _wait_exit(proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def test_stop_waits_for_the_drain_by_default(tmp_path):
    handle = _spawn(DRAINS, tmp_path)
    handle.stop()
    assert handle.proc.returncode == 0  # exited through its SIGTERM handler, before stop returned


def test_stop_without_waiting_returns_during_the_drain_and_still_reaps(tmp_path):
    handle = _spawn(DRAINS, tmp_path)
    handle.stop(wait=False)
    assert handle.proc.poll() is None  # still draining: the caller did not wait
    _wait_exit(handle.proc, 20)
    assert handle.proc.returncode == 0


def test_a_process_ignoring_sigterm_is_killed_after_the_timeout(tmp_path):
    handle = _spawn(IGNORES_TERM, tmp_path)
    handle.stop(timeout=0.5, wait=False)
    _wait_exit(handle.proc, 20)
    assert handle.proc.returncode == -9
