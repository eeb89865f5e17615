"""Keep a server process tree running: start it, and when it exits on its own (a crash, a kill),
log the cause and start it again after a backoff. Used by `sglang-mx serve --restart on-failure`.

The child runs in its own session, so its process group holds everything it spawned (SGLang's
scheduler and detokenizer); on exit the group is killed before the restart so no orphan keeps
the port or the memory. A clean exit (code 0) or a SIGTERM/SIGINT to the supervisor ends it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO


@dataclass(frozen=True)
class RestartPolicy:
    backoff_s: float = 1.0  # first wait before a restart
    max_backoff_s: float = 30.0  # the doubling stops here
    stable_s: float = 60.0  # a run this long resets the backoff
    max_restarts: int | None = None  # None: no limit


def describe_exit(returncode: int) -> str:
    """'exit code 3' or 'signal SIGKILL' (Popen reports a signal death as -signum)."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class Supervisor:
    def __init__(
        self,
        cmd: Sequence[str],
        policy: RestartPolicy = RestartPolicy(),
        log: Callable[[str], None] | None = None,
        env: dict[str, str] | None = None,
        stdout: IO[bytes] | None = None,
    ) -> None:
        self.cmd = list(cmd)
        self.stdout = stdout  # None: the child shares ours
        self.policy = policy
        self.log = log or (lambda msg: print(f"sglang-mx: {msg}", file=sys.stderr, flush=True))
        self.env = env
        self.restarts = 0
        self.child: subprocess.Popen | None = None
        self._stopping: int | None = None  # the signal stop() was given
        # stop() from another thread waits out a spawn in progress, so the child it signals is
        # the one run() waits on; reentrant, as stop() also runs in a signal handler in run()'s
        # own thread (supervise), where run() checks again once the spawn returns.
        self._lock = threading.RLock()

    def _spawn(self) -> subprocess.Popen:
        return subprocess.Popen(
            self.cmd,
            start_new_session=True,
            env=self.env,
            stdout=self.stdout,
            stderr=subprocess.STDOUT if self.stdout is not None else None,
        )

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Ask the running child's process group to exit; run() then returns."""
        with self._lock:
            self._stopping = signum
            child = self.child
        if child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signum)

    def run(self) -> int:
        """Run until a clean exit, a stop(), or max_restarts; returns the last exit code."""
        backoff = self.policy.backoff_s
        while True:
            started = time.monotonic()
            with self._lock:
                if self._stopping is not None:  # stopped before this child started
                    return -self._stopping
                self.child = self._spawn()
            if self._stopping is not None:  # stopped by a signal handler during the spawn
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.child.pid, self._stopping)
            rc = self.child.wait()
            _kill_group(self.child.pid)  # the scheduler/detokenizer may outlive the main process
            if self._stopping is not None or rc == 0:
                return rc
            if time.monotonic() - started >= self.policy.stable_s:
                backoff = self.policy.backoff_s
            if self.policy.max_restarts is not None and self.restarts >= self.policy.max_restarts:
                self.log(f"server exited ({describe_exit(rc)}); restart limit reached, giving up")
                return rc
            self.restarts += 1
            self.log(
                f"server exited ({describe_exit(rc)}) after {time.monotonic() - started:.1f} s; "
                f"restart {self.restarts} in {backoff:.1f} s"
            )
            deadline = time.monotonic() + backoff
            while time.monotonic() < deadline and self._stopping is None:
                time.sleep(min(0.1, backoff))
            if self._stopping is not None:
                return rc
            backoff = min(backoff * 2, self.policy.max_backoff_s)


def supervise(cmd: Sequence[str], policy: RestartPolicy = RestartPolicy()) -> int:
    """Run `cmd` under a Supervisor, forwarding SIGTERM/SIGINT to the child's group."""
    sup = Supervisor(cmd, policy)

    def _forward(signum, _frame):
        sup.stop(signum)

    signal.signal(signal.SIGTERM, _forward)
    signal.signal(signal.SIGINT, _forward)
    return sup.run()
