"""The `sglang-mx` command line: help for every subcommand, info, serve's SGLang command."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from sglang_mx.cli.main import SUBCOMMANDS, main
from sglang_mx.layer_map import INDEXER_MODULE, MLA_MODULE


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sglang_mx.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=None if env is None else {**os.environ, **env},
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
    assert "sglang_mx.seam.plugin:register" in info["plugin"]["sglang.srt.plugins"]
    assert "sglang_mx.seam.platform:activate" in info["plugin"]["sglang.srt.platforms"]
    assert info["kernels"]["arch"] == "cpu"
    assert "torch reference" in info["kernels"][MOE_ROW]
    assert info["kernels"]["MoE router (sigmoid + bias top-k)"].startswith(
        "SGLang TopK.forward_native (platform key 'native')"
    )
    assert info["kernels"]["attention default"] == "torch_native"
    layers = info["layers"]
    assert layers["routed experts (MoE)"] == info["kernels"][MOE_ROW]
    for kind in ("shared experts", "dense MLP"):
        assert "MxFp4LinearMethod" in layers[kind] and "UnquantizedLinearMethod" in layers[kind]
    assert layers["attention GQA"].startswith("torch_native; --attention-backend mx_triton")
    # MLA / DSA rows name our module when this build ships it, else say nothing serves them.
    for kind, module in (("attention MLA", MLA_MODULE), ("DSA indexer", INDEXER_MODULE)):
        shipped = importlib.util.find_spec(module) is not None
        assert layers[kind].startswith("sglang_mx" if shipped else "none: "), layers[kind]


MOE_ROW = "MXFP4 MoE experts (quant_method mxfp4/quark)"
GPU_TRITON = "Triton fused MoE, dot_scaled for bf16/fp16 activations, unpack for fp32"
# What runs the experts for each SGLANG_MX_MOE_BACKEND: (on this CPU box, on a GPU node). The
# mx_cpu platform has no SGLang MXFP4 MoE to defer to, so "sglang" still runs ours on the CPU
# (auto: the torch reference).
MOE_PATHS = {
    "auto": ("torch reference", GPU_TRITON),
    "torch": ("torch reference", "torch reference"),
    "triton": ("Triton fused MoE (Triton interpreter)", GPU_TRITON),
    "sglang": ("torch reference", "SGLang's own MXFP4 MoE method"),
}


@pytest.mark.parametrize("backend", sorted(MOE_PATHS))
def test_info_reports_the_moe_path_that_dispatches(backend, monkeypatch):
    from sgl_kernel_rocm.moe import resolve_backend
    from sglang_mx.machine_info import kernel_paths
    from sglang_mx.quant.moe_method import MxFp4MoEMethod
    from sglang_mx.quant.scheme import MxScheme

    monkeypatch.setenv("SGLANG_MX_MOE_BACKEND", backend)
    reported = kernel_paths()[MOE_ROW]
    assert reported.startswith(MOE_PATHS[backend][0]), reported
    # The MoE method the server builds asks for the backend that the report describes.
    method = MxFp4MoEMethod(MxScheme("mxfp4", "none"))
    ran = resolve_backend(method.kernel_backend, "cpu")
    assert ran == ("triton" if "Triton" in reported else "torch")


def test_info_cli_with_sglang_moe_backend_on_cpu():
    # The command itself, for the value it used to misreport as "Triton fused MoE".
    r = run_cli("info", "--json", env={"SGLANG_MX_MOE_BACKEND": "sglang"})
    assert r.returncode == 0, r.stderr
    reported = json.loads(r.stdout)["kernels"][MOE_ROW]
    assert reported.startswith("torch reference") and "Triton" not in reported


# A GPU node cannot be had here: its one input, whether a GPU is visible, is faked (named).
@pytest.mark.parametrize("backend", sorted(MOE_PATHS))
def test_moe_dispatch_on_a_gpu_node(backend, monkeypatch):
    from sglang_mx import env as env_mod
    from sglang_mx.quant.moe_dispatch import describe_moe, moe_dispatch

    monkeypatch.setattr(env_mod._Env, "gpu_visible", lambda self: True)  # fake GPU
    monkeypatch.setenv("SGLANG_MX_MOE_BACKEND", backend)
    assert describe_moe("cuda", "gfx950").startswith(MOE_PATHS[backend][1])
    # The plugin routes SGLang's MXFP4 MoE layers to us exactly when the report says ours runs.
    assert (moe_dispatch().owner == "sglang") == (backend == "sglang")


def test_serve_passes_sglang_arguments_through(capsys):
    assert (
        main(["serve", "--dry-run", "--port", "31234", "--tp", "8", "--mem-fraction-static", "0.8"])
        == 0
    )
    cmd = capsys.readouterr().out.split()
    assert cmd[1:3] == ["-m", "sglang.launch_server"]
    assert cmd[cmd.index("--port") + 1] == "31234"
    assert cmd[cmd.index("--model-path") + 1].endswith("tiny-glm5-quark")
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


def test_serve_mtp_adds_sglang_eagle_arguments(capsys):
    assert main(["serve", "--dry-run", "--mtp", "--port", "31235"]) == 0
    cmd = capsys.readouterr().out.split()
    assert cmd[cmd.index("--model-path") + 1].endswith("tiny-glm5-quark")  # has a NextN layer
    at = cmd.index("--speculative-algorithm")
    assert cmd[at : at + 8] == [
        "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2",
    ]  # fmt: skip
    assert main(["serve", "--dry-run"]) == 0
    assert "--speculative-algorithm" not in capsys.readouterr().out


@pytest.mark.parametrize("name", ["production-480-24-60", "3k-0.2k-50"])
def test_one_workload_flag_across_bench_plan_and_roofline(name, tmp_path, capsys):
    """Issue 43: `--workload NAME` (a preset or IN-OUT-HIT) means one workload in bench gen/run/
    sweep, plan and roofline; bench's old --preset still works and says it is the old name."""
    from sglang_mx.capacity.workload import named_workload

    spec = named_workload(name)
    n_in, n_out = round(spec.input_len.mean), round(spec.output_len.mean)
    trace = tmp_path / "t.jsonl"
    assert main(["bench", "gen", "--workload", name, "--num-requests", "4", "-o", str(trace)]) == 0
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert {sum(n for _, n in r["segments"]) for r in rows[1:]} == {n_in}
    capsys.readouterr()
    assert main(["roofline", "--workload", name, "--layout", "tp8", "--json"]) == 0
    roof = json.loads(capsys.readouterr().out)["workload"]
    assert (roof["input_len"], roof["output_len"], roof["hit_rate"]) == (n_in, n_out, spec.hit_rate)
    out = tmp_path / "plan"
    argv = ["plan", "--workload", name, "--layout", "tp8", "--rates", "1", "--num-requests", "20",
            "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["bench", "gen", "--preset", name, "--num-requests", "2", "-o", str(trace)]) == 0
    assert "--preset is now --workload" in capsys.readouterr().err
    for argv in (["bench", "gen", "--workload", "20x"], ["roofline", "--workload", "20x"],
                 ["plan", "--workload", "20x", "--rates", "1"]):  # fmt: skip
        assert main(argv) == 2
        assert "workload '20x': use a preset" in capsys.readouterr().err


def test_keys_under_provider_and_the_old_top_level_spelling(tmp_path, capsys):
    """Issue 43: keys belong to the provider (`provider keys create|list|revoke`); the top-level
    `keys` still works and notes the new name; `provider` alone still asks for what it serves
    with; a refused revoke is an error on stderr."""
    db = str(tmp_path / "p.sqlite")
    assert main(["provider", "keys", "create", "--db", db, "--name", "alpha"]) == 0
    out, err = capsys.readouterr()
    key_id = out.split()[1]
    assert out.splitlines()[1].startswith("sk-") and err == ""
    assert main(["keys", "create", "--db", db, "--name", "beta"]) == 0
    assert "`keys` is now `provider keys`" in capsys.readouterr().err
    assert main(["provider", "keys", "list", "--db", db]) == 0
    listed = capsys.readouterr().out
    assert "alpha" in listed and "beta" in listed and "sk-" not in listed
    assert main(["provider", "keys", "revoke", "--db", db, key_id]) == 0
    assert main(["provider", "keys", "revoke", "--db", db, key_id]) == 1
    out, err = capsys.readouterr()
    assert f"no active key {key_id}" in err and "no active key" not in out
    with pytest.raises(SystemExit) as exc:
        main(["provider", "--db", db])
    assert exc.value.code == 2
    assert "required: --upstream, --pricing" in capsys.readouterr().err
