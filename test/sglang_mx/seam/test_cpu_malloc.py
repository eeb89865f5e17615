"""The allocator `sglang-mx serve` gives a CPU server (seam/cpu_malloc.py): jemalloc preloaded
where it is installed, else glibc with a fixed mmap threshold; the user's choice kept. What it
prevents (a decode's resident memory climbing each step) is measured by
benchmark/cpu_malloc_rss.py, not here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sglang_mx.cli.main import main
from sglang_mx.seam.cpu_malloc import JEMALLOC_PATHS, MMAP_THRESHOLD, malloc_env


def _installed() -> str:
    found = next((p for p in JEMALLOC_PATHS if os.path.exists(p)), None)
    assert found, "no libjemalloc.so.2: `make setup` installs Debian's libjemalloc2 as root"
    return found


def test_jemalloc_is_preloaded_where_installed_and_others_are_kept(tmp_path):
    lib = tmp_path / "libjemalloc.so.2"
    lib.write_bytes(b"")
    add, account = malloc_env("auto", {}, [str(tmp_path / "missing.so"), str(lib)])
    assert add == {"LD_PRELOAD": str(lib)} and "jemalloc" in account
    add, _ = malloc_env("auto", {"LD_PRELOAD": "/opt/libfoo.so"}, [str(lib)])
    assert add == {"LD_PRELOAD": f"{lib} /opt/libfoo.so"}
    # an allocator already preloaded, or glibc asked for: nothing added
    assert malloc_env("auto", {"LD_PRELOAD": "/x/libtcmalloc.so.4"}, [str(lib)])[0] == {}
    assert malloc_env("glibc", {}, [str(lib)])[0] == {}


def test_without_jemalloc_glibc_gets_a_fixed_mmap_threshold(tmp_path):
    none = [str(tmp_path / "missing.so")]
    assert malloc_env("auto", {}, none)[0] == {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)}
    assert malloc_env("auto", {"MALLOC_MMAP_THRESHOLD_": "65536"}, none)[0] == {}
    with pytest.raises(ValueError, match="libjemalloc2"):
        malloc_env("jemalloc", {}, none)


def test_the_preload_reaches_a_real_process():
    _installed()
    add, _ = malloc_env("auto", {})
    env = {**os.environ, **add}
    maps = subprocess.run(
        [sys.executable, "-c", "print(open('/proc/self/maps').read())"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "libjemalloc" in maps


def test_serve_sets_the_allocator_for_the_server_it_starts(monkeypatch, capsys):
    from sglang_mx.env import ENV

    if not ENV.platform_wanted():
        pytest.skip("a GPU is visible: serve leaves the allocator alone")
    lib = _installed()
    for name in ("LD_PRELOAD", "MALLOC_MMAP_THRESHOLD_", "SGLANG_MX_MALLOC", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    started = []
    monkeypatch.setattr(os, "execv", lambda path, argv: started.append(dict(os.environ)))
    assert main(["serve", "--port", "31237"]) == 0
    assert started and started[0]["LD_PRELOAD"] == lib
    assert f"CPU allocator: jemalloc ({lib})" in capsys.readouterr().out


def test_serve_refuses_an_unknown_allocator_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_MX_MALLOC", "tcmallocx")
    assert main(["serve", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SGLANG_MX_MALLOC must be auto, jemalloc or glibc" in err


def served_scheduler_maps(env: dict[str, str], tmp_path) -> tuple[str, str]:
    """`sglang-mx serve` started for real on the bundled MXFP4 model with `env`: its scheduler
    process's /proc/PID/maps and the serve log, read as soon as that process exists (the server
    is stopped then, before it loads the model)."""
    import signal
    import time
    from pathlib import Path

    import psutil
    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.server import free_port

    cli = str(Path(sys.executable).parent / "sglang-mx")
    cmd = [cli, "serve", "--model-path", str(bundled_model_path("mxfp4")), "--host",
           "127.0.0.1", "--port", str(free_port())]  # fmt: skip
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        deadline, maps = time.monotonic() + 300, None
        while maps is None:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "no scheduler process in 300 s"
            for child in psutil.Process(proc.pid).children(recursive=True):
                try:
                    if "sglang::scheduler" in " ".join(child.cmdline()):
                        maps = Path(f"/proc/{child.pid}/maps").read_text()
                except (psutil.Error, OSError):
                    continue
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return maps, (tmp_path / "serve.log").read_text()


def jemalloc_problem(maps: str, lib: str) -> str | None:
    """What is wrong with a served scheduler's /proc/PID/maps (None: `lib` is mapped)."""
    if os.path.realpath(lib) not in maps:
        return "the served scheduler has no libjemalloc mapped"
    return None


@pytest.mark.server
@pytest.mark.parametrize("malloc", ["auto", "glibc"], ids=["served", "planted-glibc"])
def test_a_served_scheduler_has_jemalloc_mapped(tmp_path, malloc):
    """`sglang-mx serve` started for real: its scheduler process (the one whose resident memory
    climbed on glibc) has libjemalloc mapped, read from the kernel's /proc/PID/maps. The plant
    (SGLANG_MX_MALLOC=glibc, the switch that turns the preload off) serves the same model with
    no preload: the check fails on it, so it reads what the process really mapped (2026-12-06:
    no libjemalloc in the planted scheduler's maps; each start 24-40 s on the 2-core box)."""
    from sglang_mx.env import ENV

    if not ENV.platform_wanted():
        pytest.skip("a GPU is visible: serve leaves the allocator alone")
    lib = _installed()
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "MALLOC_MMAP_THRESHOLD_", "SGLANG_MX_MALLOC")}  # fmt: skip
    if malloc != "auto":
        env["SGLANG_MX_MALLOC"] = malloc
    maps, log = served_scheduler_maps(env, tmp_path)
    problem = jemalloc_problem(maps, lib)
    if malloc == "auto":
        assert f"CPU allocator: jemalloc ({lib})" in log, log[-2000:]
        assert problem is None, problem
    else:
        assert "CPU allocator: glibc" in log, log[-2000:]
        assert problem is not None and "libjemalloc" not in maps, problem
