"""Which layer owns what (docs/scale-out.md "Layers"): an smg flag whose job the provider or the
workers own (keys, rate limits, reasoning/tool parsing, stored history) is refused by our launch
helpers and scripts with a message naming the flag and the layer that does the job, before any
process starts. Each refused flag is one smg 1.13's own parser takes, so the list follows smg.
No servers: parsing and the scripts' first lines only."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sglang_mx.provider import launch
from sglang_mx.recipes import check

ROOT = Path(__file__).parents[3]
# A value for each refused flag that takes one, as a user would pass it.
VALUES = {"--api-key": "sk-x", "--tenant-api-key": "t1:sk-x", "--reasoning-parser": "glm45",
          "--tool-call-parser": "glm47_moe", "--history-backend": "memory",
          "--tenant-rate-limit-config": "/tmp/limits.yaml",
          "--rate-limit-tokens-per-second": "10", "--mcp-config-path": "/tmp/mcp.yaml"}  # fmt: skip


def _argv(flag: str) -> list[str]:
    return [flag, VALUES[flag]] if flag in VALUES else [flag]


@pytest.mark.parametrize("flag", sorted(launch.REFUSED_ROUTER_FLAGS))
def test_each_refused_flag_is_smgs_and_is_refused_by_name(flag) -> None:
    argv = _argv(flag)
    assert check.router_flag_error(["--worker-urls", "http://a:1", *argv]) is None, flag
    why = launch.refused_router_flag(["--policy", "cache_aware", *argv])
    assert why is not None and f"smg {flag} " in why
    assert any(layer in why for layer in ("provider", "worker")), why
    with pytest.raises(ValueError, match=f"smg {flag} "):
        with launch.router_process(["http://127.0.0.1:9"], extra_args=tuple(argv)):
            pass  # never reached: refused before the gateway is spawned


def test_flags_the_stack_uses_are_not_refused() -> None:
    ours = launch.router_flags() + ["--policy", "round_robin", "--pd-disaggregation"]
    assert launch.refused_router_flag(ours) is None
    assert launch.refused_router_flag(["--api-key=sk-x"]) is not None  # the = spelling too


def test_the_topology_script_refuses_before_starting_anything(tmp_path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "ROUTER_ARGS": "--reasoning-parser glm45",
           "BASE_PORT": "33990"}  # fmt: skip
    script = ROOT / "scripts" / "launch" / "provider_topology.sh"
    # Its own session: were the refusal gone, whatever the script started dies with the test.
    proc = subprocess.Popen(["bash", str(script), "/no/model", "/no/pricing.json", "1"], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        err = "(still running after 60 s)"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 2, err
    assert "smg --reasoning-parser is not used in this stack" in err
    assert "--reasoning-parser / --tool-call-parser" in err  # where parsing is done
    assert not list(tmp_path.glob("worker-*.log")), "a worker was started"
