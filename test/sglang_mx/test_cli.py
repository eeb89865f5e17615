"""The `sglang-mx` command line: help for every subcommand, info, serve's SGLang command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sglang_mx.cli.main import SUBCOMMANDS, main


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sglang_mx.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_help_for_every_subcommand(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert f"sglang-mx {command}" in out
    assert len(out.splitlines()) >= 3


def test_info_json_reports_plugin_and_kernels():
    r = run_cli("info", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["versions"]["sglang"] == "0.5.23"
    assert "sglang_mx.plugin:register" in info["plugin"]["sglang.srt.plugins"]
    assert "sglang_mx.platform:activate" in info["plugin"]["sglang.srt.platforms"]
    assert info["kernels"]["arch"] == "cpu"
    assert "torch reference" in info["kernels"]["MXFP4 MoE experts (quant_method mxfp4/quark)"]


def test_serve_passes_sglang_arguments_through(capsys):
    assert (
        main(["serve", "--dry-run", "--port", "31234", "--tp", "8", "--mem-fraction-static", "0.8"])
        == 0
    )
    cmd = capsys.readouterr().out.split()
    assert cmd[1:3] == ["-m", "sglang.launch_server"]
    assert cmd[cmd.index("--port") + 1] == "31234"
    assert cmd[cmd.index("--model-path") + 1].endswith("tiny-glm-moe-mxfp4")
    assert "--enable-cache-report" in cmd
    assert cmd[-4:] == ["--tp", "8", "--mem-fraction-static", "0.8"]


def test_unknown_argument_rejected_outside_serve():
    r = run_cli("info", "--bogus")
    assert r.returncode == 2
    assert "unrecognized arguments: --bogus" in r.stderr


def test_serve_restart_flags_are_ours_not_sglangs(capsys):
    argv = ["serve", "--dry-run", "--restart", "on-failure", "--restart-backoff-s", "2",
            "--max-restarts", "5", "--tp", "2"]  # fmt: skip
    assert main(argv) == 0
    cmd = capsys.readouterr().out.split()
    assert not [a for a in cmd if a.startswith(("--restart", "--max-restarts"))], cmd
    assert cmd[-2:] == ["--tp", "2"]
    r = run_cli("serve", "--dry-run", "--restart", "always")
    assert r.returncode == 2 and "invalid choice: 'always'" in r.stderr
