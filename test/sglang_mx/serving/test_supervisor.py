"""The restart supervisor of `sglang-mx serve --restart on-failure`, on real child processes:
restarts after crashes and kills with doubling backoff, names each cause, kills what the dead
child left behind, stops on a clean exit, on stop(), and at the restart limit. (A real SGLang
worker killed under load and coming back: test_router_topology.py.)"""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
from sglang_mx.supervisor import RestartPolicy, Supervisor, describe_exit

FAST = RestartPolicy(backoff_s=0.1, max_backoff_s=0.4, stable_s=60.0)


def _child(tmp: Path, body: str) -> list[str]:
    """A Python child that appends its start time to runs.txt, then runs `body` with `run`
    (0-based count of earlier runs) defined."""
    script = tmp / "child.py"
    script.write_text(
        "import os, sys, time, signal, subprocess\n"
        f"log = {str(tmp / 'runs.txt')!r}\n"
        "run = len(open(log).read().splitlines()) if os.path.exists(log) else 0\n"
        "open(log, 'a').write(f'{time.monotonic()}\\n')\n" + textwrap.dedent(body)
    )
    return [sys.executable, str(script)]


def _runs(tmp: Path) -> list[float]:
    return [float(x) for x in (tmp / "runs.txt").read_text().split()]


def test_restarts_after_crash_until_clean_exit(tmp_path):
    lines: list[str] = []
    sup = Supervisor(_child(tmp_path, "sys.exit(3 if run < 2 else 0)"), FAST, log=lines.append)
    assert sup.run() == 0
    assert sup.restarts == 2 and len(_runs(tmp_path)) == 3
    assert all("server exited (exit code 3)" in line for line in lines), lines


def test_kill_is_named_and_backoff_doubles(tmp_path):
    lines: list[str] = []
    body = "if run < 3: os.kill(os.getpid(), signal.SIGKILL)\n"
    sup = Supervisor(_child(tmp_path, body), FAST, log=lines.append)
    assert sup.run() == 0
    starts = _runs(tmp_path)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert len(gaps) == 3
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2 and gaps[2] >= 0.4, gaps
    assert "signal SIGKILL" in lines[0] and "restart 1 in 0.1 s" in lines[0], lines
    assert "restart 3 in 0.4 s" in lines[2], lines  # capped at max_backoff_s


def test_gives_up_at_restart_limit(tmp_path):
    lines: list[str] = []
    policy = RestartPolicy(backoff_s=0.05, max_restarts=2)
    sup = Supervisor(_child(tmp_path, "sys.exit(7)"), policy, log=lines.append)
    assert sup.run() == 7
    assert len(_runs(tmp_path)) == 3 and "restart limit reached" in lines[-1]


def test_orphans_of_a_dead_child_are_killed(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    body = f"""
    if run == 0:
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(pid_file)!r}, "w").write(str(p.pid))
        sys.exit(1)
    """
    sup = Supervisor(_child(tmp_path, body), FAST, log=lambda m: None)
    assert sup.run() == 0
    grandchild = int(pid_file.read_text())
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == "zombie"


def test_stop_ends_a_running_child_without_restart(tmp_path):
    sup = Supervisor(_child(tmp_path, "time.sleep(120)"), FAST, log=lambda m: None)
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(sup.run()))
    thread.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "runs.txt").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    sup.stop()
    thread.join(timeout=30)
    assert done and done[0] != 0 and sup.restarts == 0
    assert len(_runs(tmp_path)) == 1


class _StopDuringSpawn(Supervisor):
    """stop() called from another thread while run() is still starting the child: the likely
    cause of a CI failure (2026-12-07) where stop() ran before run() had recorded its new child,
    signalled nothing, and run() waited on a child sleeping 120 s."""

    def _spawn(self):
        child = super()._spawn()
        stopper = threading.Thread(target=self.stop)
        stopper.start()
        stopper.join(timeout=0.5)  # finished at once, or waiting for the spawn to end
        return child


def test_stop_during_a_spawn_reaches_the_new_child(tmp_path):
    sup = _StopDuringSpawn(_child(tmp_path, "time.sleep(120)"), FAST, log=lambda m: None)
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(sup.run()))
    thread.start()
    thread.join(timeout=30)
    assert done and done[0] != 0 and sup.restarts == 0
    assert sup.child.poll() is not None


def test_stop_before_run_starts_nothing(tmp_path):
    sup = Supervisor(_child(tmp_path, "time.sleep(120)"), FAST, log=lambda m: None)
    sup.stop()
    assert sup.run() == -15 and sup.child is None
    assert not (tmp_path / "runs.txt").exists()


def test_describe_exit():
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-9) == "signal SIGKILL"
    assert describe_exit(-15) == "signal SIGTERM"
