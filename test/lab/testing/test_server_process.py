"""ServerProcess.stop (sglang_mx_lab.testing.server): SIGTERM to the server's process group, SIGKILL
after the timeout; with wait=False the caller does not sit through the shutdown (SGLang takes
about 5 s even idle), and the process is still reaped. A plain Python child stands in for the
server: what is tested is the signalling, not SGLang."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sglang_mx_lab.testing.server import ServerProcess

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


def _wait_reaped(proc: subprocess.Popen, timeout: float) -> None:
    """Waits until the child is gone from /proc, without reaping it here: an exited child stays
    a zombie (state Z) until someone waits on it, so only stop()'s reaper thread can end this."""
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + timeout
    while stat.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    state = _proc_state(stat)
    assert state is None, f"child {proc.pid} not reaped after {timeout} s (state {state})"
    while proc.returncode is None and time.monotonic() < deadline + 1:  # the reaper's store
        time.sleep(0.01)


def _proc_state(stat: Path) -> str | None:
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def test_stop_waits_for_the_drain_by_default(tmp_path):
    handle = _spawn(DRAINS, tmp_path)
    handle.stop()
    assert handle.proc.returncode == 0  # exited through its SIGTERM handler, before stop returned


def test_stop_without_waiting_returns_during_the_drain_and_still_reaps(tmp_path):
    handle = _spawn(DRAINS, tmp_path)
    handle.stop(wait=False)
    assert _proc_state(Path(f"/proc/{handle.proc.pid}/stat")) not in (None, "Z")  # draining
    _wait_reaped(handle.proc, 20)
    assert handle.proc.returncode == 0  # set by the reaper thread's wait()


def test_a_process_ignoring_sigterm_is_killed_after_the_timeout(tmp_path):
    handle = _spawn(IGNORES_TERM, tmp_path)
    handle.stop(timeout=0.5, wait=False)
    _wait_reaped(handle.proc, 20)
    assert handle.proc.returncode == -9
