"""Multi-node launch on loopback: two `launch_server` processes, `--nnodes 2 --node-rank 0/1
--dist-init-addr 127.0.0.1:PORT --tp 2`, one TP rank each, serve the default tiny GLM-5 (mx_dsa,
MLA + DSA, MXFP4 MoE) in float32 with greedy tokens equal to one TP1 server. Each "node" has one
local rank (device id 0), so seam/cpu_binding.py gives each its own slice of this box's cores
(scripts/launch/multinode.sh is the same launch, for two real nodes)."""

from __future__ import annotations

import os
import time

import pytest
from sglang_mx.seam.cpu_binding import BIND_ENV
from sglang_mx_lab.testing import layout_serving as L
from sglang_mx_lab.testing.server import (
    default_serve_args,
    free_port,
    spawn_server,
    start_server,
    wait_ready,
)

pytestmark = pytest.mark.server

PROMPTS = L.PROMPTS[:2]


def multinode_args(node_rank: int, dist_port: int) -> list[str]:
    return [
        *L.F32,
        "--tp", "2", "--nnodes", "2", "--node-rank", str(node_rank),
        "--dist-init-addr", f"127.0.0.1:{dist_port}",
    ]  # fmt: skip


def _wait_both(node0, node1, timeout: float) -> None:
    """Node 0 serving; a node 1 that died fails at once (node 0 would wait for it)."""
    deadline = time.monotonic() + timeout
    while True:
        if node1.proc.poll() is not None:
            raise RuntimeError(f"node 1 exited ({node1.proc.returncode}):\n{node1.log_tail()}")
        try:
            return wait_ready(node0, min(10.0, max(1.0, deadline - time.monotonic())))
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise


@pytest.fixture(scope="module")
def outputs():
    """Greedy tokens of the two-node TP2 launch, then of the TP1 reference (one after the
    other: the box has two cores)."""
    model, base = default_serve_args()
    env = {k: v for k, v in os.environ.items() if k != BIND_ENV}  # binding is the platform's
    dist = free_port()
    # Node 1 serves no HTTP of its own; its scheduler joins node 0's process group.
    node1 = spawn_server(model, [*base, *multinode_args(1, dist)], env=env)
    node0 = spawn_server(model, [*base, *multinode_args(0, dist)], env=env)
    try:
        _wait_both(node0, node1, 600)
        info = L.server_info(node0.base_url)
        two_node = [L.greedy(node0.base_url, p)["output_ids"] for p in PROMPTS]
        logs = (node0.log_path.read_text(errors="replace"), node1.log_path.read_text("utf-8"))
    finally:
        node0.stop()
        node1.stop()
    ref = start_server(model, [*base, *L.F32], env=env)
    try:
        tp1 = [L.greedy(ref.base_url, p)["output_ids"] for p in PROMPTS]
    finally:
        ref.stop(wait=False)
    return {"info": info, "two_node": two_node, "tp1": tp1, "logs": logs}


def test_two_nodes_form_one_tp2_server(outputs):
    info = outputs["info"]
    assert (info["tp_size"], info["nnodes"], info["attention_backend"]) == (2, 2, "mx_dsa")
    # each node bound its one rank to its own slice of the cores (cpu_binding.node_groups)
    binds = [line for log in outputs["logs"] for line in log.splitlines() if BIND_ENV in line]
    values = {line.rsplit("=", 1)[1].strip() for line in binds}
    assert len(binds) == 2 and len(values) == 2, binds


def test_two_node_greedy_equals_tp1(outputs):
    assert all(len(t) == L.NEW_TOKENS for t in outputs["tp1"])
    assert outputs["two_node"] == outputs["tp1"]
