"""More SGLang ranks than NUMA nodes on a CPU box (seam/cpu_binding.py): a core group per rank is
set for SGLang, an explicit SGLANG_CPU_OMP_THREADS_BIND wins, and too few cores is refused in
one line naming the variable (by `sglang-mx serve`, before SGLang starts). That `--tp 2`
serves on this box without the variable: test_layouts.py."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from sglang_mx.seam import cpu_binding as CB


def test_bind_groups_split_the_cores_evenly():
    assert CB.bind_groups(1, [0, 1]) == "0,1"
    assert CB.bind_groups(2, [1, 0]) == "0|1"
    assert CB.bind_groups(2, [0, 1, 2, 3, 4]) == "0,1,2|3,4"
    with pytest.raises(CB.CpuBindingError, match="3 SGLang ranks .* only 2 .*SGLANG_CPU_OMP"):
        CB.bind_groups(3, [0, 1])


@pytest.mark.parametrize(
    "argv,ranks",
    [
        ([], 1),
        (["--tp", "2"], 2),
        (["--tp-size", "2", "--dp", "2"], 4),  # DP replicas: processes multiply
        (["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"], 2),
        (["--tensor-parallel-size", "2", "--attn-dp-size", "2"], 2),
        (["--tp", "4", "--nnodes", "2"], 2),
        (["--tp", "2", "--pp-size", "2", "--model-path", "x"], 4),
    ],
)
def test_ranks_from_the_command_line(argv, ranks):
    assert CB.ranks_from_cli(argv) == ranks


def _args(**kw):
    base = dict(tp_size=2, pp_size=1, dp_size=1, enable_dp_attention=False, nnodes=1)
    return SimpleNamespace(**(base | kw))


def test_apply_sets_the_variable_only_when_needed(monkeypatch):
    monkeypatch.delenv(CB.BIND_ENV, raising=False)
    monkeypatch.setattr(CB, "numa_nodes", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert CB.apply(_args(tp_size=1)) is None and CB.BIND_ENV not in os.environ
    assert CB.apply(_args()) == "0|1" and os.environ[CB.BIND_ENV] == "0|1"
    monkeypatch.setenv(CB.BIND_ENV, "1|0")  # the user's choice stands
    assert CB.apply(_args()) is None and os.environ[CB.BIND_ENV] == "1|0"
    monkeypatch.delenv(CB.BIND_ENV)
    monkeypatch.setattr(CB, "numa_nodes", lambda: 2)  # one node per rank: SGLang's own binding
    assert CB.apply(_args()) is None and CB.BIND_ENV not in os.environ
    with pytest.raises(CB.CpuBindingError):
        CB.apply(_args(tp_size=4))


def test_each_node_of_a_multinode_launch_binds_its_own_ranks(monkeypatch):
    """SGLang asserts on all nodes' ranks but indexes the variable by the local device id (0 on
    a node with one rank): a node's value holds its own ranks; loopback nodes share the box."""
    monkeypatch.setattr(CB, "numa_nodes", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})

    def bind(**kw):
        monkeypatch.delenv(CB.BIND_ENV, raising=False)
        return CB.apply(_args(nnodes=2, **kw))

    loop = "127.0.0.1:5000"
    assert bind(node_rank=0, dist_init_addr=loop) == "0,1"
    assert bind(node_rank=1, dist_init_addr=loop) == "2,3"
    assert bind(tp_size=4, node_rank=1, dist_init_addr="localhost:5000") == "2|3"
    # a real second node has its own cores: all of them for its one rank
    assert bind(node_rank=1, dist_init_addr="10.0.0.2:5000") == "0,1,2,3"
    monkeypatch.setattr(CB, "numa_nodes", lambda: 2)  # one NUMA node per rank in all
    assert bind(node_rank=1, dist_init_addr=loop) is None
    monkeypatch.setattr(CB, "numa_nodes", lambda: 1)
    with pytest.raises(CB.CpuBindingError, match="--node-rank 2 is outside 0..1"):
        bind(node_rank=2, dist_init_addr=loop)
    assert CB.on_loopback("[::1]:5000") and not CB.on_loopback(None)


def test_serve_refuses_more_ranks_than_cores_in_one_line():
    env = {k: v for k, v in os.environ.items() if k != CB.BIND_ENV}
    ranks = len(os.sched_getaffinity(0)) + 1
    out = subprocess.run(
        [sys.executable, "-m", "sglang_mx.cli.main", "serve", "--tp", str(ranks)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and CB.BIND_ENV in lines[0] and f"{ranks} SGLang ranks" in lines[0]
    assert "Traceback" not in out.stderr + out.stdout
