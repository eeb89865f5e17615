"""pin_cores on a stand-in process tree whose argv looks like a server's: every thread of it and
of its child ends up on the one core asked for, and a port nobody listens with is an error."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from sglang_mx_lab.testing.pin_cores import allowed_cores, pin_server, server_processes

# a parent with a second thread and a child process, argv carrying the server's flags
SCRIPT = (
    "import subprocess, sys, threading, time; "
    "threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to tell apart")
def test_pin_server_pins_every_thread_and_child():
    core = min(os.sched_getaffinity(0))
    argv = [sys.executable, "-c", SCRIPT, "sglang.launch_server", "--port", "45999"]
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        for _ in range(100):  # until the child and the second thread exist
            procs = server_processes("http://127.0.0.1:45999")
            if len(procs) == 2 and procs[0].num_threads() >= 2:
                break
            time.sleep(0.05)
        assert allowed_cores("http://127.0.0.1:45999") == os.sched_getaffinity(0)
        assert pin_server("http://127.0.0.1:45999", {core}) >= 3
        for p in server_processes("http://127.0.0.1:45999"):
            for t in p.threads():
                assert os.sched_getaffinity(t.id) == {core}
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    with pytest.raises(LookupError):
        server_processes("http://127.0.0.1:45999")
